//! AWS credentials and region from the standard places, and SigV4 request signing.
//!
//! Credentials, first found: the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`), then the profile (`AWS_PROFILE`, else `default`) of the shared
//! credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) and of the
//! config file (`AWS_CONFIG_FILE`, else `~/.aws/config`, section `[profile NAME]`). Region:
//! `AWS_REGION`, `AWS_DEFAULT_REGION`, then the profile's `region`. Web identity, SSO and the
//! instance metadata service need calls to AWS and are not read.

use crate::provider::ProviderError;
use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// AWS credentials (the secret parts never printed).
#[derive(Clone)]
pub struct AwsCredentials {
    access_key_id: String,
    secret_access_key: SecretString,
    session_token: Option<SecretString>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

impl AwsCredentials {
    /// Credentials from their parts.
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
    ) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            secret_access_key: SecretString::from(secret_access_key.into()),
            session_token: session_token.map(SecretString::from),
        }
    }

    /// The access key id (not a secret).
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The session token, if any (a secret: for redaction only).
    pub fn session_token(&self) -> Option<&str> {
        self.session_token.as_ref().map(ExposeSecret::expose_secret)
    }

    /// The secret access key (for redaction only).
    pub fn secret_access_key(&self) -> &str {
        self.secret_access_key.expose_secret()
    }
}

/// Reads the environment through `env` (a function, so that tests need not touch the
/// process's environment).
pub struct AwsEnvironment<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> AwsEnvironment<'a> {
    /// The environment read through `env`.
    pub fn new(env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self { env }
    }

    fn var(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.trim().is_empty())
    }

    fn profile(&self) -> String {
        self.var("AWS_PROFILE").unwrap_or_else(|| "default".to_owned())
    }

    fn home_file(&self, variable: &str, name: &str) -> Option<PathBuf> {
        self.var(variable)
            .map(PathBuf::from)
            .or_else(|| self.var("HOME").map(|home| Path::new(&home).join(".aws").join(name)))
    }

    /// The credentials, first found in the environment, then the profile's files.
    pub fn credentials(&self) -> Result<Option<AwsCredentials>, String> {
        if let (Some(id), Some(secret)) =
            (self.var("AWS_ACCESS_KEY_ID"), self.var("AWS_SECRET_ACCESS_KEY"))
        {
            return Ok(Some(AwsCredentials::new(id, secret, self.var("AWS_SESSION_TOKEN"))));
        }
        let profile = self.profile();
        let sections = [
            (self.home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials"), profile.clone()),
            (self.home_file("AWS_CONFIG_FILE", "config"), config_section(&profile)),
        ];
        for (path, section) in sections {
            let Some(values) =
                path.as_deref().map(|p| read_section(p, &section)).transpose()?.flatten()
            else {
                continue;
            };
            if let (Some(id), Some(secret)) =
                (values.get("aws_access_key_id"), values.get("aws_secret_access_key"))
            {
                let token = values.get("aws_session_token").cloned();
                return Ok(Some(AwsCredentials::new(id.clone(), secret.clone(), token)));
            }
        }
        Ok(None)
    }

    /// The region: the environment, then the profile's `region` in the config file.
    pub fn region(&self) -> Result<Option<String>, String> {
        if let Some(region) = self.var("AWS_REGION").or_else(|| self.var("AWS_DEFAULT_REGION")) {
            return Ok(Some(region));
        }
        let Some(path) = self.home_file("AWS_CONFIG_FILE", "config") else { return Ok(None) };
        let values = read_section(&path, &config_section(&self.profile()))?;
        Ok(values.and_then(|v| v.get("region").cloned()))
    }
}

/// The config file's section of a profile: `default`, else `profile NAME`.
fn config_section(profile: &str) -> String {
    if profile == "default" {
        profile.to_owned()
    } else {
        format!("profile {profile}")
    }
}

/// The keys of `[section]` of the INI file at `path` (`None`: no such file or section); a
/// file that cannot be read is an error naming it.
fn read_section(path: &Path, section: &str) -> Result<Option<HashMap<String, String>>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    let mut current: Option<&str> = None;
    let mut found: Option<HashMap<String, String>> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim());
            if current == Some(section) {
                found.get_or_insert_with(HashMap::new);
            }
            continue;
        }
        if current != Some(section) {
            continue;
        }
        if let (Some((key, value)), Some(values)) = (line.split_once('='), found.as_mut()) {
            values.insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    Ok(found)
}

/// Signs `request` with SigV4 for `service` in `region` at `time`.
pub fn sign(
    request: &mut http::Request<bytes::Bytes>,
    credentials: &AwsCredentials,
    region: &str,
    time: SystemTime,
) -> Result<(), ProviderError> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_sigv4::sign::v4;
    let failed = |what: &str, e: &dyn std::fmt::Display| ProviderError::InvalidRequest {
        message: format!("signing the request for AWS: {what}: {e}"),
    };
    let identity = aws_credential_types::Credentials::new(
        credentials.access_key_id.clone(),
        credentials.secret_access_key.expose_secret().to_owned(),
        credentials.session_token.as_ref().map(|t| t.expose_secret().to_owned()),
        None,
        "agentloop",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("bedrock")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed("its parameters", &e))?
        .into();
    let uri = request.uri().to_string();
    let headers: Vec<(&str, &str)> = request
        .headers()
        .iter()
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect();
    let signable = SignableRequest::new(
        request.method().as_str(),
        &uri,
        headers.into_iter(),
        SignableBody::Bytes(request.body()),
    )
    .map_err(|e| failed("the request", &e))?;
    let (instructions, _signature) =
        sign(signable, &params).map_err(|e| failed("the signature", &e))?.into_parts();
    instructions.apply_to_request_http1x(request);
    Ok(())
}

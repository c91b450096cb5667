//! TLS for the HTTP clients agentloop builds (providers, MCP, A2A, push notifications, the
//! OTLP exporters): rustls on the ring provider with the webpki roots, configured per client.
//! No process-wide crypto provider is installed, so an application's own choice stands.

use std::sync::Arc;

/// A rustls client configuration: the ring provider, TLS 1.2 and 1.3, the webpki roots, no
/// client certificate. ALPN is left empty (hyper's HTTPS connector sets its own; set
/// `alpn_protocols` for a client that does not).
pub fn client_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// A reqwest client builder with [`client_config`] (HTTP/2 and HTTP/1.1 offered by ALPN) and
/// redirects refused: a redirected POST would lose its body or take its headers to another
/// host.
pub fn http_client_builder() -> Result<reqwest::ClientBuilder, rustls::Error> {
    let mut tls = client_config()?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_builds_without_a_process_wide_provider() -> Result<(), Box<dyn std::error::Error>> {
        assert!(rustls::crypto::CryptoProvider::get_default().is_none());
        super::http_client_builder()?.build()?;
        Ok(())
    }
}

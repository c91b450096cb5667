//! Where webhooks may be called: the operator's allowlist ([`PushAllow`]), checked on every
//! address a webhook's host resolves to — when a config is set and again on every delivery
//! (the HTTP client resolves through [`AllowResolver`], so a host that later resolves
//! elsewhere is refused, not called).

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// An entry of the allowlist that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("push_allow entry '{0}' is not 'public', a host name, '*.domain', an IP address or a CIDR")]
pub struct AllowError(pub String);

/// Why a webhook URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// Push notifications are off (the allowlist is empty).
    #[error("push notifications are off on this server")]
    Off,
    /// The URL has no host.
    #[error("the webhook URL has no host")]
    NoHost,
    /// The host does not resolve.
    #[error("the webhook host {0} could not be resolved")]
    NotResolved(String),
    /// The host resolves to an address the operator did not allow.
    #[error(
        "the webhook host {host} resolves to {addr}, which this server does not allow (push_allow)"
    )]
    Address {
        /// The URL's host.
        host: String,
        /// The refused address.
        addr: IpAddr,
    },
}

/// A network, `addr/prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    fn parse(entry: &str) -> Option<Self> {
        let (addr, prefix) = match entry.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix.parse::<u8>().ok()?)),
            None => (entry, None),
        };
        let addr = canonical(addr.trim_matches(|c| c == '[' || c == ']').parse().ok()?);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        (prefix <= max).then_some(Self { addr, prefix })
    }

    fn contains(&self, addr: IpAddr) -> bool {
        match (self.addr, addr) {
            (IpAddr::V4(net), IpAddr::V4(addr)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(addr) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(addr)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(addr) & mask
            }
            _ => false,
        }
    }
}

/// A host-name entry: exact, or `*.domain` (any name under it, not the domain itself).
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostRule {
    Exact(String),
    Under(String),
}

/// The operator's allowlist of webhook destinations (`ServerConfig::push_allow`).
///
/// Entries: `public` (any host whose addresses are all public unicast), a host name
/// (`hooks.example.com`) or `*.example.com` (that host / those hosts, when they resolve to
/// public addresses), an IP address or a CIDR (`10.1.0.0/16`, `127.0.0.1`, `::1`): those
/// addresses, even private, loopback or link-local ones. An address is allowed when a
/// network entry contains it, or when it is public and the list has `public` or names the
/// URL's host; a URL is allowed when every address its host resolves to is. Loopback,
/// private, link-local (with the cloud metadata address 169.254.169.254), shared, multicast
/// and reserved addresses are never public.
///
/// The default, an empty list, turns push notifications off: the card says
/// `pushNotifications: false` and the push methods answer PushNotificationNotSupported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushAllow {
    public: bool,
    hosts: Vec<HostRule>,
    nets: Vec<Net>,
}

impl PushAllow {
    /// No destination: push notifications off (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// Any public address (and nothing else).
    pub fn public() -> Self {
        Self { public: true, ..Self::default() }
    }

    /// The allowlist of `entries` (see the [type docs](Self)).
    pub fn parse<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Result<Self, AllowError> {
        let mut allow = Self::default();
        for entry in entries {
            let raw = entry.as_ref().trim();
            let lower = raw.to_ascii_lowercase();
            if lower == "public" {
                allow.public = true;
            } else if let Some(net) = Net::parse(&lower) {
                allow.nets.push(net);
            } else if let Some(domain) = lower.strip_prefix("*.") {
                if !host_name(domain) {
                    return Err(AllowError(raw.to_owned()));
                }
                allow.hosts.push(HostRule::Under(format!(".{domain}")));
            } else if host_name(&lower) {
                allow.hosts.push(HostRule::Exact(lower.trim_end_matches('.').to_owned()));
            } else {
                return Err(AllowError(raw.to_owned()));
            }
        }
        Ok(allow)
    }

    /// Whether nothing is allowed (push notifications off).
    pub fn is_empty(&self) -> bool {
        !self.public && self.hosts.is_empty() && self.nets.is_empty()
    }

    fn names(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.iter().any(|rule| match rule {
            HostRule::Exact(name) => *name == host,
            HostRule::Under(suffix) => host.ends_with(suffix.as_str()),
        })
    }

    /// Whether `addr` may be called for a URL whose host is `host` (a name, or `None` for
    /// an IP literal).
    pub fn allows(&self, host: Option<&str>, addr: IpAddr) -> bool {
        let addr = canonical(addr);
        self.nets.iter().any(|net| net.contains(addr))
            || (is_public(addr) && (self.public || host.is_some_and(|h| self.names(h))))
    }

    /// Checks `url`: resolves its host and checks every address.
    pub async fn check_url(&self, url: &Url) -> Result<(), Denied> {
        if self.is_empty() {
            return Err(Denied::Off);
        }
        let host = url.host_str().ok_or(Denied::NoHost)?;
        match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            Ok(addr) => self.check_literal(addr),
            Err(_) => self.resolve(host).await.map(drop),
        }
    }

    /// Checks the IP literal of a URL.
    pub fn check_literal(&self, addr: IpAddr) -> Result<(), Denied> {
        if self.allows(None, addr) {
            Ok(())
        } else {
            Err(Denied::Address { host: addr.to_string(), addr })
        }
    }

    /// Resolves `name` and checks every address: all of them, or a refusal.
    pub async fn resolve(&self, name: &str) -> Result<Vec<SocketAddr>, Denied> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, 0))
            .await
            .map_err(|_| Denied::NotResolved(name.to_owned()))?
            .collect();
        if addrs.is_empty() {
            return Err(Denied::NotResolved(name.to_owned()));
        }
        if let Some(bad) = addrs.iter().find(|a| !self.allows(Some(name), a.ip())) {
            return Err(Denied::Address { host: name.to_owned(), addr: bad.ip() });
        }
        Ok(addrs)
    }
}

/// Whether `s` is a DNS host name (letters, digits, `-`, dots between labels).
fn host_name(s: &str) -> bool {
    let s = s.trim_end_matches('.');
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// An IPv4 address written as IPv6 (mapped `::ffff:a.b.c.d`), as IPv4.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Whether `addr` is a public unicast address.
pub fn is_public(addr: IpAddr) -> bool {
    match canonical(addr) {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(addr: Ipv4Addr) -> bool {
    let [a, b, c, _] = addr.octets();
    !(a == 0                                   // this network
        || a == 10                             // private
        || a == 127                            // loopback
        || (a == 100 && (64..128).contains(&b)) // shared (CGNAT)
        || (a == 169 && b == 254)              // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0)      // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)      // documentation
        || (a == 192 && b == 168)              // private
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || (a == 198 && b == 51 && c == 100)   // documentation
        || (a == 203 && b == 0 && c == 113)    // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn public_v6(addr: Ipv6Addr) -> bool {
    let segments = addr.segments();
    let first = segments[0];
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64: judged by the IPv4 address it carries.
        let [.., hi, lo] = segments;
        let v4 = Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
        return public_v4(v4);
    }
    !(addr.is_unspecified()
        || addr.is_loopback()
        || segments[..6] == [0, 0, 0, 0, 0, 0] // IPv4-compatible (deprecated)
        || first & 0xff00 == 0xff00            // multicast
        || first & 0xfe00 == 0xfc00            // unique local
        || first & 0xffc0 == 0xfe80            // link-local
        || first & 0xffc0 == 0xfec0            // site-local (deprecated)
        || (first == 0x2001 && segments[1] == 0x0db8) // documentation
        || first == 0x0100) // discard-only
}

/// The HTTP client's resolver: a name resolves only to allowed addresses, else fails
/// (so a webhook host that now resolves to a refused address is not called).
#[derive(Debug, Clone)]
pub struct AllowResolver {
    allow: Arc<PushAllow>,
}

impl AllowResolver {
    /// The resolver of `allow`.
    pub fn new(allow: Arc<PushAllow>) -> Self {
        Self { allow }
    }
}

impl Resolve for AllowResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        Box::pin(async move {
            let addrs = allow.resolve(name.as_str()).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

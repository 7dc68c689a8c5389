//! The client's address behind trusted reverse proxies: `Forwarded`
//! (RFC 7239) and `X-Forwarded-For`.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use http::HeaderMap;

/// An address or network whose `Forwarded` / `X-Forwarded-For` headers the
/// server believes: `10.0.0.5`, `10.0.0.0/8`, `::1`, `fd00::/8`.
///
/// ```
/// let net: magma_server::TrustedProxy = "10.0.0.0/8".parse().unwrap();
/// assert!(net.contains("10.1.2.3".parse().unwrap()));
/// assert!(!net.contains("192.0.2.1".parse().unwrap()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustedProxy {
    addr: IpAddr,
    prefix: u8,
}

impl TrustedProxy {
    /// Whether `ip` is this address or in this network. An IPv4 address
    /// written as IPv6 (`::ffff:10.0.0.1`) counts as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Why a [`TrustedProxy`] did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IP address or network; expected e.g. 10.0.0.5, 10.0.0.0/8 or fd00::/8")]
pub struct TrustedProxyError(String);

impl FromStr for TrustedProxy {
    type Err = TrustedProxyError;

    fn from_str(s: &str) -> Result<TrustedProxy, TrustedProxyError> {
        let bad = || TrustedProxyError(s.to_owned());
        let (addr, prefix) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr = addr.parse::<IpAddr>().map_err(|_| bad())?.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(bad)?,
        };
        Ok(TrustedProxy { addr, prefix })
    }
}

impl fmt::Display for TrustedProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn trusted(proxies: &[TrustedProxy], ip: IpAddr) -> bool {
    proxies.iter().any(|p| p.contains(ip))
}

/// The client's address for a request that came from `peer`: when `peer`
/// is a trusted proxy, the address its forwarding headers name (the
/// `Forwarded` header if present, else `X-Forwarded-For`), walking from the
/// nearest hop back past every trusted proxy. A hop that is not an address
/// (`unknown`, an obfuscated name, garbage) ends the walk at the last
/// address known.
pub(crate) fn client_ip(peer: IpAddr, headers: &HeaderMap, proxies: &[TrustedProxy]) -> IpAddr {
    if !trusted(proxies, peer) {
        return peer;
    }
    let hops: Vec<Option<IpAddr>> = if headers.contains_key("forwarded") {
        headers
            .get_all("forwarded")
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("").split(','))
            .map(forwarded_for)
            .collect()
    } else {
        headers
            .get_all("x-forwarded-for")
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("").split(','))
            .map(|hop| node_ip(hop.trim()))
            .collect()
    };
    let mut client = peer;
    for hop in hops.into_iter().rev() {
        match hop {
            Some(ip) => {
                client = ip;
                if !trusted(proxies, ip) {
                    break;
                }
            }
            None => break,
        }
    }
    client
}

/// The address in the `for=` pair of one `Forwarded` element.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case("for") {
            return None;
        }
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v);
        node_ip(v)
    })
}

/// `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]`, `[2001:db8::1]:4711` or
/// a bare IPv6 address.
fn node_ip(node: &str) -> Option<IpAddr> {
    if let Some(rest) = node.strip_prefix('[') {
        let (ip, _) = rest.split_once(']')?;
        return ip.parse().ok();
    }
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    let (ip, port) = node.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<TrustedProxy> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_parse_and_contain() {
        let n: TrustedProxy = "10.0.0.0/8".parse().unwrap();
        assert!(n.contains(ip("10.255.0.1")));
        assert!(n.contains(ip("::ffff:10.0.0.1")));
        assert!(!n.contains(ip("11.0.0.1")));
        assert!(!n.contains(ip("::1")));
        let all: TrustedProxy = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("192.0.2.1")));
        let v6: TrustedProxy = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        let one: TrustedProxy = "127.0.0.1".parse().unwrap();
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        for bad in ["", "10.0.0.0/33", "localhost", "10.0.0.0/x", "::/129"] {
            let e = bad.parse::<TrustedProxy>().unwrap_err();
            assert!(e.to_string().contains("expected"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_client_is_the_nearest_untrusted_hop() {
        let proxies = nets(&["127.0.0.1", "10.0.0.0/8"]);
        let peer = ip("127.0.0.1");
        let h = headers(&[("x-forwarded-for", "203.0.113.9, 10.0.0.1")]);
        assert_eq!(client_ip(peer, &h, &proxies), ip("203.0.113.9"));
        // A forged leftmost entry does not win over a real untrusted hop.
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 198.51.100.2")]);
        assert_eq!(client_ip(peer, &h, &proxies), ip("198.51.100.2"));
        // Several header lines count as one list.
        let h = headers(&[
            ("x-forwarded-for", "198.51.100.7"),
            ("x-forwarded-for", "10.9.9.9"),
        ]);
        assert_eq!(client_ip(peer, &h, &proxies), ip("198.51.100.7"));
        // Every hop trusted: the farthest one.
        let h = headers(&[("x-forwarded-for", "10.1.1.1, 10.2.2.2")]);
        assert_eq!(client_ip(peer, &h, &proxies), ip("10.1.1.1"));
    }

    #[test]
    fn forwarded_wins_and_is_parsed_per_rfc_7239() {
        let proxies = nets(&["127.0.0.1", "10.0.0.0/8"]);
        let peer = ip("127.0.0.1");
        let h = headers(&[
            (
                "forwarded",
                r#"for="[2001:db8::7]:4711";proto=https, For=10.1.2.3;by=10.0.0.1"#,
            ),
            ("x-forwarded-for", "192.0.2.99"),
        ]);
        assert_eq!(client_ip(peer, &h, &proxies), ip("2001:db8::7"));
        let h = headers(&[("forwarded", "for=192.0.2.60:8080;proto=http")]);
        assert_eq!(client_ip(peer, &h, &proxies), ip("192.0.2.60"));
        // An obfuscated hop ends the walk at the last address known.
        let h = headers(&[("forwarded", "for=192.0.2.1, for=_hidden, for=10.0.0.2")]);
        assert_eq!(client_ip(peer, &h, &proxies), ip("10.0.0.2"));
    }

    #[test]
    fn headers_from_an_untrusted_peer_are_ignored() {
        let proxies = nets(&["10.0.0.0/8"]);
        let h = headers(&[("x-forwarded-for", "203.0.113.9")]);
        assert_eq!(client_ip(ip("192.0.2.5"), &h, &proxies), ip("192.0.2.5"));
        assert_eq!(client_ip(ip("10.0.0.1"), &h, &[]), ip("10.0.0.1"));
        let junk = headers(&[("x-forwarded-for", "not an address")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &junk, &proxies), ip("10.0.0.1"));
    }
}

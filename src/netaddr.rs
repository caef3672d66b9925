//! Small network vocabulary the inventory and the installer's files are checked with: CIDRs
//! (containment, overlap), addresses with a prefix, MAC addresses (compared case-insensitively,
//! as the installer does not), DNS labels and names. std only: `std::net` parses the addresses.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A network in CIDR notation (`10.20.0.0/24`, `fd00::/64`), host bits cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    /// The network address.
    pub addr: IpAddr,
    /// The prefix length.
    pub prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;

    /// Parses `ADDR/PREFIX`; host bits set (`10.20.0.5/24`) are refused, since a network is meant.
    fn from_str(s: &str) -> Result<Self, String> {
        let (ip, prefix) = parse_prefixed(s)?;
        let net = Cidr { addr: ip, prefix }.network();
        if net.addr != ip {
            return Err(format!("'{s}' has host bits set; the network is {}", net));
        }
        Ok(net)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Cidr {
    /// This CIDR with host bits cleared.
    pub fn network(self) -> Cidr {
        Cidr {
            addr: mask(self.addr, self.prefix),
            prefix: self.prefix,
        }
    }

    /// True when `ip` is inside (same family).
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }

    /// True when the two networks share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        if self.addr.is_ipv4() != other.addr.is_ipv4() {
            return false;
        }
        let p = self.prefix.min(other.prefix);
        mask(self.addr, p) == mask(other.addr, p)
    }
}

/// Parses `IP/PREFIX` (an interface address: host bits are the point). Returns the address and
/// the prefix length.
pub fn parse_prefixed(s: &str) -> Result<(IpAddr, u8), String> {
    let (ip, prefix) = s.split_once('/').ok_or_else(|| {
        format!("'{s}' has no prefix length; write ADDRESS/PREFIX, e.g. 10.20.0.11/24")
    })?;
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| format!("'{ip}' is not an IP address"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= max)
        .ok_or_else(|| format!("'{prefix}' is not a prefix length from 0 to {max}"))?;
    Ok((ip, prefix))
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - prefix.min(32))
            };
            IpAddr::V4((bits & m).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - prefix.min(128))
            };
            IpAddr::V6((bits & m).into())
        }
    }
}

/// A MAC address in canonical form (lower case, `:`-separated), or why it is not one. Accepts
/// what the installer accepts (Go's `net.ParseMAC` limited to 6 bytes): `:` or `-` separated
/// pairs, or `.` separated groups of four (`b83f.d24a.1001`), in any case.
pub fn normalize_mac(s: &str) -> Result<String, String> {
    let hex = |p: &&str| p.chars().all(|c| c.is_ascii_hexdigit());
    let pairs: Vec<&str> = s.split([':', '-']).collect();
    let quads: Vec<&str> = s.split('.').collect();
    let digits = if pairs.len() == 6 && pairs.iter().all(|p| p.len() == 2 && hex(p)) {
        pairs.concat()
    } else if quads.len() == 3 && quads.iter().all(|p| p.len() == 4 && hex(p)) {
        quads.concat()
    } else {
        return Err(format!(
            "'{s}' is not a MAC address; write six hex pairs, e.g. b8:3f:d2:4a:10:01"
        ));
    };
    let digits = digits.to_ascii_lowercase();
    let bytes: Vec<&str> = (0..6).map(|i| &digits[2 * i..2 * i + 2]).collect();
    Ok(bytes.join(":"))
}

/// True for an RFC 1123 DNS label: 1 to 63 of `a-z`, `0-9`, `-`, not starting or ending with
/// `-` (lower case only, as Kubernetes node names).
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// True for a DNS name: dot-separated DNS labels, at most 253 characters.
pub fn is_dns_name(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_contain_and_overlap() {
        let net: Cidr = "10.20.0.0/24".parse().unwrap();
        assert!(net.contains("10.20.0.7".parse().unwrap()));
        assert!(!net.contains("10.20.1.7".parse().unwrap()));
        assert!(!net.contains("fd00::1".parse().unwrap()));
        assert!(net.overlaps(&"10.20.0.128/25".parse().unwrap()));
        assert!(!net.overlaps(&"10.21.0.0/16".parse().unwrap()));
        assert!("10.20.0.5/24".parse::<Cidr>().is_err());
        assert!("10.20.0.0/33".parse::<Cidr>().is_err());
        let v6: Cidr = "fd00:1::/64".parse().unwrap();
        assert!(v6.contains("fd00:1::5".parse().unwrap()));
    }

    #[test]
    fn macs_and_names() {
        assert_eq!(
            normalize_mac("B8-3F-D2-4A-10-01").unwrap(),
            "b8:3f:d2:4a:10:01"
        );
        assert!(normalize_mac("b8:3f:d2:4a:10").is_err());
        assert!(normalize_mac("b8:3f-d2:4a:10:1").is_err());
        assert_eq!(
            normalize_mac("B83F.D24A.1001").unwrap(),
            "b8:3f:d2:4a:10:01"
        );
        assert!(is_dns_label("gpu-worker-01"));
        assert!(!is_dns_label("GPU_worker"));
        assert!(!is_dns_label("-a"));
        assert!(is_dns_name("ai.example.com"));
        assert!(!is_dns_name("ai..example.com"));
    }
}

//! A small DNS client (RFC 1035 over UDP): one question of type A or AAAA sent to one server,
//! the addresses of its answer. The preflight asks the site's DNS servers (`networks.dns`)
//! directly, not this machine's resolver: the bastion's `/etc/resolv.conf` may point elsewhere
//! than the nodes will, and it is the nodes' view that the agent installer depends on. No
//! dependency does this for us without pulling in a whole resolver (hickory-resolver: a cache,
//! DNSSEC and system-configuration reading the preflight must not use); the wire format of one
//! question is small.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// The record type asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordType {
    /// IPv4 address.
    A,
    /// IPv6 address.
    Aaaa,
}

impl RecordType {
    fn code(self) -> u16 {
        match self {
            RecordType::A => 1,
            RecordType::Aaaa => 28,
        }
    }

    /// The type that holds `ip`.
    pub fn of(ip: IpAddr) -> RecordType {
        match ip {
            IpAddr::V4(_) => RecordType::A,
            IpAddr::V6(_) => RecordType::Aaaa,
        }
    }
}

/// Why a question got no addresses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DnsError {
    /// No answer within the time limit, after every try.
    #[error("no answer from {server} after {tries} tries of {}s", .timeout.as_secs())]
    Timeout {
        /// The server.
        server: SocketAddr,
        /// Tries made.
        tries: u32,
        /// Each try's limit.
        timeout: Duration,
    },
    /// The server says the name does not exist.
    #[error("{server} answers NXDOMAIN: {name} does not exist")]
    NxDomain {
        /// The server.
        server: SocketAddr,
        /// The name asked.
        name: String,
    },
    /// The name exists but has no record of the type.
    #[error("{server} has no {kind} record for {name}")]
    NoRecords {
        /// The server.
        server: SocketAddr,
        /// The name asked.
        name: String,
        /// `A` or `AAAA`.
        kind: &'static str,
    },
    /// The server answered with another error code (SERVFAIL 2, REFUSED 5, ...).
    #[error("{server} answers {rcode} ({}) for {name}", rcode_name(*.rcode))]
    Rcode {
        /// The server.
        server: SocketAddr,
        /// The name asked.
        name: String,
        /// The response code.
        rcode: u8,
    },
    /// The name cannot be asked (an empty or over-long label).
    #[error("{name} is not a DNS name: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A socket error, or an answer that is not DNS.
    #[error("{server}: {reason}")]
    Io {
        /// The server.
        server: SocketAddr,
        /// What went wrong.
        reason: String,
    },
}

fn rcode_name(rcode: u8) -> &'static str {
    match rcode {
        1 => "FORMERR",
        2 => "SERVFAIL",
        4 => "NOTIMP",
        5 => "REFUSED",
        _ => "an error",
    }
}

/// How long each try waits, and how many tries.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// One try's limit.
    pub timeout: Duration,
    /// Tries (at least 1).
    pub tries: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(2),
            tries: 2,
        }
    }
}

/// The addresses `server` gives for `name` (a CNAME chain in the answer is followed: every
/// address of the type in the answer section counts).
pub async fn query(
    server: SocketAddr,
    name: &str,
    kind: RecordType,
    limits: Limits,
) -> Result<Vec<IpAddr>, DnsError> {
    let id = question_id();
    let packet = encode_query(id, name, kind)?;
    let io = |e: std::io::Error| DnsError::Io {
        server,
        reason: e.to_string(),
    };
    let bind: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = tokio::net::UdpSocket::bind(bind).await.map_err(io)?;
    socket.connect(server).await.map_err(io)?;
    let mut buf = vec![0u8; 4096];
    for _ in 0..limits.tries.max(1) {
        socket.send(&packet).await.map_err(io)?;
        let deadline = tokio::time::Instant::now() + limits.timeout;
        loop {
            let got = tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await;
            let Ok(got) = got else { break };
            let n = got.map_err(io)?;
            // Another question's late answer (an earlier try's, with our id too, is fine).
            match decode_answer(&buf[..n], id, kind) {
                Some(answer) => return answer.into_result(server, name, kind),
                None => continue,
            }
        }
    }
    Err(DnsError::Timeout {
        server,
        tries: limits.tries.max(1),
        timeout: limits.timeout,
    })
}

/// A decoded answer to our question.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    rcode: u8,
    addresses: Vec<IpAddr>,
}

impl Answer {
    fn into_result(
        self,
        server: SocketAddr,
        name: &str,
        kind: RecordType,
    ) -> Result<Vec<IpAddr>, DnsError> {
        match self.rcode {
            0 if self.addresses.is_empty() => Err(DnsError::NoRecords {
                server,
                name: name.to_string(),
                kind: match kind {
                    RecordType::A => "A",
                    RecordType::Aaaa => "AAAA",
                },
            }),
            0 => Ok(self.addresses),
            3 => Err(DnsError::NxDomain {
                server,
                name: name.to_string(),
            }),
            rcode => Err(DnsError::Rcode {
                server,
                name: name.to_string(),
                rcode,
            }),
        }
    }
}

/// A question id that differs between questions (not a security measure: the reply must also
/// come from the server the socket is connected to).
fn question_id() -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    (nanos ^ (std::process::id() << 7)) as u16
}

/// The query packet: header (recursion desired), one question of class IN.
fn encode_query(id: u16, name: &str, kind: RecordType) -> Result<Vec<u8>, DnsError> {
    let bad = |reason: &str| DnsError::BadName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    let mut p = Vec::with_capacity(64);
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    let trimmed = name.trim_end_matches('.');
    if trimmed.is_empty() || trimmed.len() > 253 {
        return Err(bad("empty, or longer than 253 characters"));
    }
    for label in trimmed.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(bad("a label is empty or longer than 63 characters"));
        }
        p.push(label.len() as u8);
        p.extend_from_slice(label.as_bytes());
    }
    p.push(0);
    p.extend_from_slice(&kind.code().to_be_bytes());
    p.extend_from_slice(&1u16.to_be_bytes());
    Ok(p)
}

/// The answer to question `id` in `msg`, or `None` when `msg` is not one (another id, not a
/// response, truncated beyond reading).
fn decode_answer(msg: &[u8], id: u16, kind: RecordType) -> Option<Answer> {
    if msg.len() < 12 || u16::from_be_bytes([msg[0], msg[1]]) != id || msg[2] & 0x80 == 0 {
        return None;
    }
    let rcode = msg[3] & 0x0f;
    let qdcount = u16::from_be_bytes([msg[4], msg[5]]);
    let ancount = u16::from_be_bytes([msg[6], msg[7]]);
    let mut at = 12;
    for _ in 0..qdcount {
        at = skip_name(msg, at)? + 4;
    }
    let mut addresses = Vec::new();
    for _ in 0..ancount {
        at = skip_name(msg, at)?;
        let header = msg.get(at..at + 10)?;
        let rtype = u16::from_be_bytes([header[0], header[1]]);
        let len = u16::from_be_bytes([header[8], header[9]]) as usize;
        let data = msg.get(at + 10..at + 10 + len)?;
        at += 10 + len;
        match (kind, rtype, data.len()) {
            (RecordType::A, 1, 4) => addresses.push(IpAddr::V4(Ipv4Addr::new(
                data[0], data[1], data[2], data[3],
            ))),
            (RecordType::Aaaa, 28, 16) => {
                let octets: [u8; 16] = data.try_into().ok()?;
                addresses.push(IpAddr::V6(Ipv6Addr::from(octets)))
            }
            _ => {}
        }
    }
    Some(Answer { rcode, addresses })
}

/// The offset after the (possibly compressed) name at `at`.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)?;
        match len {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => return Some(at + 2),
            l => at += 1 + l as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response as dnsmasq writes it: the question echoed, a CNAME then an A record, the
    /// owner names compressed to the question's.
    #[test]
    fn an_answer_with_a_cname_chain_gives_its_addresses() {
        let q = encode_query(0x1234, "api.lab.example.com", RecordType::A).unwrap();
        let mut r = q.clone();
        r[2] = 0x81;
        r[3] = 0x80;
        r[7] = 2;
        // CNAME to "x" + pointer to the question name's "lab" (offset 16).
        r.extend_from_slice(&[0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 4, 1, b'x', 0xc0, 16]);
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 168, 111, 5]);
        let a = decode_answer(&r, 0x1234, RecordType::A).unwrap();
        assert_eq!(a.rcode, 0);
        assert_eq!(
            a.addresses,
            vec!["192.168.111.5".parse::<IpAddr>().unwrap()]
        );
        assert!(
            decode_answer(&r, 0x1235, RecordType::A).is_none(),
            "another id"
        );
        assert!(
            decode_answer(&q, 0x1234, RecordType::A).is_none(),
            "not a response"
        );
        let mut nx = q;
        nx[2] = 0x81;
        nx[3] = 0x83;
        let server: SocketAddr = "192.0.2.1:53".parse().unwrap();
        let e = decode_answer(&nx, 0x1234, RecordType::A)
            .unwrap()
            .into_result(server, "api.lab.example.com", RecordType::A)
            .unwrap_err();
        assert!(matches!(e, DnsError::NxDomain { .. }), "{e}");
    }

    #[test]
    fn names_that_cannot_be_asked_are_refused() {
        assert!(encode_query(1, "a..b", RecordType::A).is_err());
        assert!(encode_query(1, &"x".repeat(64), RecordType::A).is_err());
        assert!(encode_query(1, "api.lab.example.com.", RecordType::Aaaa).is_ok());
    }
}

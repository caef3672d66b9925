//! An SNTP client (RFC 4330): one mode-3 request to UDP port 123, the mode-4 reply checked
//! (our transmit time echoed as its originate time, a stratum from 1 to 15, no alarm leap
//! indicator, a transmit time) and the clock offset and round-trip delay computed from the four
//! timestamps. What chronyd and ntpd serve, and what the nodes' chronyd will ask.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds from the NTP era (1900) to the Unix epoch (1970).
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// A server's reply.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SntpReply {
    /// Its stratum (1: a reference clock; chrony's `local stratum N` serves N).
    pub stratum: u8,
    /// Its reference id: a clock's ASCII code at stratum 1, else its upstream's IPv4 address.
    pub reference: String,
    /// This machine's clock minus the server's, in seconds (positive: this machine is ahead).
    pub offset: f64,
    /// The round trip, in seconds.
    pub delay: f64,
}

/// Why a server's time cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NtpError {
    /// No reply after every try.
    #[error("no NTP reply from {server} after {tries} tries of {}s", .timeout.as_secs())]
    Timeout {
        /// The server.
        server: SocketAddr,
        /// Tries made.
        tries: u32,
        /// Each try's limit.
        timeout: Duration,
    },
    /// A kiss-o'-death (stratum 0): the server refuses to serve, with its code (DENY, RATE...).
    #[error("{server} refuses to serve time (kiss-o'-death {code})")]
    Kiss {
        /// The server.
        server: SocketAddr,
        /// Its four-letter code.
        code: String,
    },
    /// The server is not synchronised itself (leap indicator 3, or stratum 16).
    #[error("{server} is not synchronised itself (leap indicator {leap}, stratum {stratum})")]
    Unsynchronised {
        /// The server.
        server: SocketAddr,
        /// Leap indicator.
        leap: u8,
        /// Stratum.
        stratum: u8,
    },
    /// A socket error, or a reply that is not an NTP server's.
    #[error("{server}: {reason}")]
    Io {
        /// The server.
        server: SocketAddr,
        /// What went wrong.
        reason: String,
    },
}

/// Asks `server` for the time: `tries` requests, each waiting `timeout` for its reply.
pub async fn query(
    server: SocketAddr,
    timeout: Duration,
    tries: u32,
) -> Result<SntpReply, NtpError> {
    let io = |e: std::io::Error| NtpError::Io {
        server,
        reason: e.to_string(),
    };
    let bind: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = tokio::net::UdpSocket::bind(bind).await.map_err(io)?;
    socket.connect(server).await.map_err(io)?;
    let mut buf = [0u8; 512];
    for _ in 0..tries.max(1) {
        let t1 = ntp_now();
        socket.send(&request(t1)).await.map_err(io)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let Ok(got) = tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await else {
                break;
            };
            let n = got.map_err(io)?;
            let t4 = ntp_now();
            // A reply to another (earlier) request of ours: wait for this one's.
            if n >= 48 && buf[24..32] != t1.to_be_bytes() {
                continue;
            }
            return reply(server, &buf[..n], t1, t4);
        }
    }
    Err(NtpError::Timeout {
        server,
        tries: tries.max(1),
        timeout,
    })
}

/// The 48-byte request: leap 0, version 4, mode 3 (client), our transmit time.
fn request(t1: u64) -> [u8; 48] {
    let mut p = [0u8; 48];
    p[0] = 0x23;
    p[40..48].copy_from_slice(&t1.to_be_bytes());
    p
}

/// The reply to a request sent at `t1`, received at `t4`, checked.
fn reply(server: SocketAddr, p: &[u8], t1: u64, t4: u64) -> Result<SntpReply, NtpError> {
    let bad = |reason: String| NtpError::Io { server, reason };
    if p.len() < 48 {
        return Err(bad(format!(
            "a {}-byte reply is not NTP (48 bytes at least)",
            p.len()
        )));
    }
    let (leap, mode, stratum) = (p[0] >> 6, p[0] & 7, p[1]);
    if mode != 4 {
        return Err(bad(format!("the reply's mode is {mode}, not 4 (server)")));
    }
    let ts = |at: usize| u64::from_be_bytes(p[at..at + 8].try_into().expect("8 bytes"));
    if ts(24) != t1 {
        return Err(bad(
            "the reply does not answer our request (originate time differs)".into(),
        ));
    }
    if stratum == 0 {
        return Err(NtpError::Kiss {
            server,
            code: String::from_utf8_lossy(&p[12..16])
                .trim_matches('\0')
                .to_string(),
        });
    }
    let (t2, t3) = (ts(32), ts(40));
    if leap == 3 || stratum >= 16 || t3 == 0 {
        return Err(NtpError::Unsynchronised {
            server,
            leap,
            stratum,
        });
    }
    let reference = match stratum {
        1 => String::from_utf8_lossy(&p[12..16])
            .trim_matches('\0')
            .to_string(),
        _ => Ipv4Addr::new(p[12], p[13], p[14], p[15]).to_string(),
    };
    let (t1, t2, t3, t4) = (seconds(t1), seconds(t2), seconds(t3), seconds(t4));
    Ok(SntpReply {
        stratum,
        reference,
        offset: ((t1 - t2) + (t4 - t3)) / 2.0,
        delay: (t4 - t1) - (t3 - t2),
    })
}

/// Now as an NTP timestamp (seconds since 1900 in the high 32 bits, the fraction in the low).
fn ntp_now() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() + NTP_UNIX_OFFSET;
    let frac = ((now.subsec_nanos() as u64) << 32) / 1_000_000_000;
    (secs << 32) | frac
}

fn seconds(ts: u64) -> f64 {
    (ts >> 32) as f64 + (ts & 0xffff_ffff) as f64 / 4_294_967_296.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> SocketAddr {
        "192.0.2.1:123".parse().unwrap()
    }

    fn answer(t1: u64, t2: u64, t3: u64, first: u8, stratum: u8) -> [u8; 48] {
        let mut p = [0u8; 48];
        p[0] = first;
        p[1] = stratum;
        p[12..16].copy_from_slice(b"LOCL");
        p[24..32].copy_from_slice(&t1.to_be_bytes());
        p[32..40].copy_from_slice(&t2.to_be_bytes());
        p[40..48].copy_from_slice(&t3.to_be_bytes());
        p
    }

    /// This machine 2 s ahead of the server and 0.5 s each way: offset +2 s (this machine
    /// minus the server), delay 1 s.
    #[test]
    fn a_server_reply_gives_offset_and_delay() {
        let s = |x: u64| x << 32;
        let (t1, t2, t3, t4) = (s(1000), s(998) + (1 << 31), s(998) + (1 << 31), s(1001));
        let r = reply(server(), &answer(t1, t2, t3, 0x24, 10), t1, t4).unwrap();
        assert_eq!(r.stratum, 10);
        assert!((r.offset - 2.0).abs() < 1e-6, "{r:?}");
        assert!((r.delay - 1.0).abs() < 1e-6, "{r:?}");
        assert_eq!(r.reference, "76.79.67.76");
    }

    #[test]
    fn kisses_unsynchronised_servers_and_strangers_are_refused() {
        let t1 = ntp_now();
        let kiss = reply(server(), &answer(t1, 1, 1, 0x24, 0), t1, t1).unwrap_err();
        assert!(
            matches!(&kiss, NtpError::Kiss { code, .. } if code == "LOCL"),
            "{kiss}"
        );
        let alarm = reply(server(), &answer(t1, 1, 1, 0xe4, 3), t1, t1).unwrap_err();
        assert!(matches!(alarm, NtpError::Unsynchronised { leap: 3, .. }));
        let client = reply(server(), &answer(t1, 1, 1, 0x23, 3), t1, t1).unwrap_err();
        assert!(client.to_string().contains("mode is 3"), "{client}");
        let other = reply(server(), &answer(t1 + 1, 1, 1, 0x24, 3), t1, t1).unwrap_err();
        assert!(other.to_string().contains("originate"), "{other}");
        assert_eq!(request(t1)[0], 0x23);
    }
}

//! The ISO server's bounds on connections (issue 28 point 4: 3000 trickling clients were all
//! held, and with the usual open-file limit a real HEAD got no answer). Served in-process on
//! 127.0.0.1 with [`Limits`] shortened through `serve::start`'s parameter; the flood comes from
//! other loopback addresses (on Linux all of 127.0.0.0/8 is loopback, so a client socket can
//! bind 127.0.0.2 as its source) while the BMC's HEAD comes from 127.0.0.1.

use bootstrap::serve::{self, Limits, ServedFile};
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support;

/// `DIR/agent.x86_64.iso` of `size` bytes, served within `limits`.
async fn serve_iso(
    dir: &std::path::Path,
    size: usize,
    limits: Limits,
) -> (serve::Running, Vec<u8>) {
    let path = dir.join("agent.x86_64.iso");
    let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    fs_err::write(&path, &bytes).unwrap();
    let file = ServedFile::open(&path).unwrap();
    let addr = "127.0.0.1:0".parse().unwrap();
    let running = serve::start(file, addr, None, None, None, limits)
        .await
        .unwrap();
    (running, bytes)
}

/// A connection from `source`, for the test to read and write without blocking.
async fn connect_from(source: Ipv4Addr, to: SocketAddr) -> std::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((source, 0)))
        .unwrap_or_else(|e| panic!("binding {source} as a source: {e}"));
    let stream = socket.connect(to).await.unwrap().into_std().unwrap();
    stream.set_nonblocking(true).unwrap();
    stream
}

/// Whether the server has closed `stream` (end of stream or reset), reading what it sent.
fn closed_by_server(mut stream: &std::net::TcpStream) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Raises this process's soft open-file limit towards `want`; what it got.
fn raise_open_files(want: u64) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= want {
        return soft;
    }
    let target = want.min(hard);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(target),
            maximum: limit.maximum,
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Issue 28 point 4: a flood of clients that connect and never finish a request head (half send
/// nothing, half trickle one byte a second) from 30 other addresses is held at the per-address
/// cap (the rest closed at once), a BMC's HEAD from 127.0.0.1 meanwhile is answered promptly
/// with the ISO's length, and every flood connection is closed by the head deadline. With no
/// per-address cap the flood would fill the server's cap (600 here) and the HEAD be refused;
/// with no head deadline the held ones would stay open.
#[test]
fn a_flood_of_trickling_clients_neither_holds_the_iso_server_nor_keeps_a_bmc_out() {
    const SOURCES: usize = 30;
    // Each flood connection costs the test two descriptors (its end and the server's).
    let files = raise_open_files(8000);
    let flood_size = 3000.min((files.saturating_sub(1000) / 2) as usize);
    assert!(
        flood_size >= 1000,
        "open-file limit {files} too low for the flood"
    );
    let limits = Limits {
        head_deadline: Duration::from_secs(4),
        stall: Duration::from_secs(60),
        per_address: 16,
        total: 600,
    };
    let dir = tempfile::tempdir().unwrap();
    support::block_on(async move {
        let (running, bytes) = serve_iso(dir.path(), 300_000, limits).await;
        let mut flood = Vec::with_capacity(flood_size);
        for i in 0..flood_size {
            let source = Ipv4Addr::new(127, 0, 0, 2 + (i % SOURCES) as u8);
            flood.push((source, connect_from(source, running.addr).await));
        }
        let flooded = Instant::now();
        let head = b"GET /agent.x86_64.iso HTTP/1.1\r\nHost: bmc\r\n";
        let trickle = |flood: &mut Vec<(Ipv4Addr, std::net::TcpStream)>, at: usize| {
            for (_, s) in flood.iter_mut().step_by(2) {
                let _ = std::io::Write::write(s, &head[at % head.len()..][..1]);
            }
        };
        trickle(&mut flood, 0);
        // Let the server accept the backlog, then see what it holds.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut open = std::collections::HashMap::<Ipv4Addr, usize>::new();
        for (source, s) in &flood {
            if !closed_by_server(s) {
                *open.entry(*source).or_default() += 1;
            }
        }
        let held: usize = open.values().sum();
        assert!(
            open.values().all(|n| *n <= limits.per_address) && held <= SOURCES * limits.per_address,
            "held beyond the per-address cap: {open:?}"
        );

        let client = reqwest::Client::builder()
            .no_proxy()
            .local_address(std::net::IpAddr::from(Ipv4Addr::LOCALHOST))
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let asked = Instant::now();
        let answer = client
            .head(&running.url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("the BMC's HEAD during the flood: {e:?}"));
        let took = asked.elapsed();
        assert_eq!(answer.status(), 200, "the BMC's HEAD during the flood");
        assert_eq!(
            answer.headers()["content-length"],
            bytes.len().to_string().as_str()
        );
        assert!(took < Duration::from_secs(3), "the HEAD took {took:?}");

        // Every flood connection is closed by the head deadline (counted from its accept, all
        // before `flooded`), trickling or not.
        let mut at = 1;
        let mut still_open = flood_size;
        while flooded.elapsed() < limits.head_deadline + Duration::from_secs(3) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            trickle(&mut flood, at);
            at += 1;
            still_open = flood.iter().filter(|(_, s)| !closed_by_server(s)).count();
            if still_open == 0 {
                break;
            }
        }
        assert_eq!(
            still_open,
            0,
            "{still_open} of {flood_size} flood connections still open {:?} after the flood, head deadline {:?}",
            flooded.elapsed(),
            limits.head_deadline
        );
        running.stop().await.unwrap();
    });
}

/// An idle keep-alive connection is closed once the head deadline passes with no new request
/// (hyper's one timer for both), and not before.
#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_head_deadline() {
    let limits = Limits {
        head_deadline: Duration::from_secs(2),
        ..Limits::ISO
    };
    let dir = tempfile::tempdir().unwrap();
    support::block_on(async move {
        let (running, bytes) = serve_iso(dir.path(), 1000, limits).await;
        let mut conn = tokio::net::TcpStream::connect(running.addr).await.unwrap();
        conn.write_all(b"HEAD /agent.x86_64.iso HTTP/1.1\r\nHost: bmc\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before answering");
            answer.extend_from_slice(&buf[..n]);
        }
        let answered = Instant::now();
        let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        assert!(text.starts_with("http/1.1 200"), "{text}");
        assert!(
            text.contains(&format!("content-length: {}", bytes.len())),
            "{text}"
        );
        let end = tokio::time::timeout(Duration::from_secs(6), conn.read(&mut buf))
            .await
            .expect("the idle connection was kept past the head deadline");
        let idle = answered.elapsed();
        assert!(
            matches!(end, Ok(0)) || end.is_err(),
            "the server sent more: {end:?}"
        );
        assert!(
            idle >= limits.head_deadline - Duration::from_millis(200)
                && idle < limits.head_deadline + Duration::from_secs(2),
            "closed after {idle:?}, the head deadline is {:?}",
            limits.head_deadline
        );
        running.stop().await.unwrap();
    });
}

/// GETs the ISO over a connection with a small receive window (so the server's writes wait on
/// the client), reading `burst` bytes then pausing `pause` (at most `pauses` times), until `size`
/// bytes of body came or the server closed; the body's bytes.
async fn fetch_in_bursts(
    to: SocketAddr,
    size: usize,
    burst: usize,
    pause: Duration,
    mut pauses: usize,
) -> usize {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(256 * 1024).unwrap();
    let mut conn = socket.connect(to).await.unwrap();
    conn.write_all(b"GET /agent.x86_64.iso HTTP/1.1\r\nHost: bmc\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut head = Vec::new();
    let mut body = 0usize;
    let mut since_pause = 0usize;
    loop {
        let n = match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return body,
            Ok(n) => n,
        };
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            body += n;
        } else {
            head.extend_from_slice(&buf[..n]);
            if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                body += head.len() - end - 4;
            }
        }
        if body >= size {
            return body;
        }
        since_pause += n;
        if since_pause >= burst && pauses > 0 {
            since_pause = 0;
            pauses -= 1;
            tokio::time::sleep(pause).await;
        }
    }
}

/// A download whose client keeps taking bytes, in bursts with pauses shorter than the stall
/// limit, runs to the end however long it takes in all; one whose client stops taking bytes for
/// longer than the stall limit is cut (which also shows the server's writes did wait on these
/// clients: the file is larger than the kernel's buffers can hold).
#[test]
fn a_slow_download_that_progresses_is_not_cut_and_a_stalled_one_is() {
    const SIZE: usize = 12 << 20;
    let limits = Limits {
        stall: Duration::from_secs(3),
        ..Limits::ISO
    };
    let dir = tempfile::tempdir().unwrap();
    support::block_on(async move {
        let (running, _) = serve_iso(dir.path(), SIZE, limits).await;
        let started = Instant::now();
        let slow = fetch_in_bursts(
            running.addr,
            SIZE,
            2 << 20,
            Duration::from_millis(1500),
            usize::MAX,
        );
        let stalled = fetch_in_bursts(running.addr, SIZE, 256 << 10, Duration::from_secs(6), 1);
        let (slow, stalled) = tokio::join!(slow, stalled);
        assert_eq!(
            slow,
            SIZE,
            "the slow download was cut after {:?}",
            started.elapsed()
        );
        assert!(
            started.elapsed() > limits.stall * 2,
            "the slow download took only {:?}: not slower than the stall limit",
            started.elapsed()
        );
        assert!(
            stalled < SIZE,
            "the stalled download got all {stalled} bytes"
        );
        running.stop().await.unwrap();
    });
}

/// A connection over the per-address cap is answered `503` with `Retry-After` and closed at
/// once, while another address is still served.
#[test]
fn a_connection_over_the_per_address_cap_is_answered_503_at_once() {
    let limits = Limits {
        per_address: 1,
        ..Limits::ISO
    };
    let dir = tempfile::tempdir().unwrap();
    support::block_on(async move {
        let (running, _) = serve_iso(dir.path(), 1000, limits).await;
        let source = Ipv4Addr::new(127, 0, 0, 5);
        let held = connect_from(source, running.addr).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let over = connect_from(source, running.addr).await;
        let mut over = tokio::net::TcpStream::from_std(over).unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(2), over.read_to_end(&mut answer))
            .await
            .expect("the connection over the cap was held")
            .unwrap();
        let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        assert!(text.starts_with("http/1.1 503"), "{text:?}");
        assert!(text.contains("retry-after: 10"), "{text:?}");
        let other = connect_from(Ipv4Addr::new(127, 0, 0, 6), running.addr).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!closed_by_server(&other), "another address was refused");
        assert!(!closed_by_server(&held), "the held connection was closed");
        drop((held, other));
        running.stop().await.unwrap();
    });
}

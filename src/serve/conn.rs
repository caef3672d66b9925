//! Connections for the file servers, bounded so that a flood of clients that connect and then
//! trickle (or send nothing) cannot hold the server: a deadline for a request's head (hyper's
//! `header_read_timeout` on tokio's timer, which also closes an idle keep-alive connection), a
//! response that stalls (no byte taken by the client) cut, and caps on connections per client
//! address and in all, so the BMCs' own requests are still answered while other addresses flood.
//! Excess connections are closed at once (plain HTTP: after a best-effort `503`), never queued.
//!
//! The accept loop is ours because `axum::serve` does not let hyper's builder be configured;
//! what each connection speaks is hyper's HTTP/1.1 with these settings.

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long a client has to send a request's head, counted from when the server waits for one:
/// a new connection, or a kept-alive one after its last answer. hyper has one timer for both,
/// so this is also how long an idle keep-alive connection is kept. A BMC sends its head at
/// once and opens a new connection when a kept one was closed; 30 s is hyper's own default.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(30);

/// How long a response may wait for the client to take a byte before it is cut. A response's
/// whole length is not bounded: a BMC streaming a 1.2 GB ISO over a 1 Mbit/s link takes near
/// three hours and must not be cut, while one that takes nothing for a minute has gone.
pub const STALL_LIMIT: Duration = Duration::from_secs(60);

/// Connections held at once for one client address. A BMC's virtual media reads with one to
/// a few connections; 16 leaves room for retries that overlap a dying connection.
pub const CONNECTIONS_PER_ADDRESS: usize = 16;

/// Connections held at once in all, lowered to the open-file limit less [`FD_RESERVE`] when
/// that is smaller (with the usual 1024, 896): a flood must never take the last descriptors.
pub const CONNECTIONS: usize = 1024;

/// Open files kept out of [`CONNECTIONS`]' reach for the rest of the process (the ISO being
/// read per request, logs, the boot stage's Redfish clients).
pub const FD_RESERVE: u64 = 128;

/// How long a client may take over its TLS handshake.
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(20);

/// A server's bounds on its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// [`HEAD_DEADLINE`].
    pub head_deadline: Duration,
    /// [`STALL_LIMIT`].
    pub stall: Duration,
    /// [`CONNECTIONS_PER_ADDRESS`].
    pub per_address: usize,
    /// [`CONNECTIONS`] (lowered to the open-file limit at start).
    pub total: usize,
}

impl Limits {
    /// The ISO server's (`bootstrap serve iso` and the boot stage's).
    pub const ISO: Limits = Limits {
        head_deadline: HEAD_DEADLINE,
        stall: STALL_LIMIT,
        per_address: CONNECTIONS_PER_ADDRESS,
        total: CONNECTIONS,
    };

    /// `bootstrap serve registry`'s: the same, without a per-address cap (a node's container
    /// runtime pulls many layers at once from one address).
    pub const REGISTRY: Limits = Limits {
        per_address: CONNECTIONS,
        ..Limits::ISO
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::ISO
    }
}

/// Serves `app` to connections from `listener` (over TLS with `tls`) within `limits` until
/// `shutdown` resolves, then lets open answers finish.
pub(super) async fn run(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let total = limits.total.min(descriptor_budget());
    let held = Arc::new(Mutex::new(Held::default()));
    let stopping = CancellationToken::new();
    // Each connection holds a receiver; the sender sees them all gone when the last ends.
    let (open_tx, open_rx) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors (EMFILE) or a connection reset before it was
                    // accepted: the backlog keeps the rest until descriptors come back.
                    tracing::warn!("accepting a connection on {:?}: {e}", listener.local_addr().ok());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let permit = match Permit::take(&held, peer.ip(), limits.per_address, total) {
            Ok(p) => p,
            Err(full) => {
                tracing::debug!("closing {peer} at once: {full}");
                if tls.is_none() {
                    let _ = tcp.try_write(REFUSED);
                }
                continue;
            }
        };
        let conn = Connection {
            peer,
            app: app.clone(),
            limits,
            stopping: stopping.clone(),
            _permit: permit,
            _open: open_rx.clone(),
        };
        let tls = tls.clone();
        tokio::spawn(conn.serve(tcp, tls));
    }
    stopping.cancel();
    drop(open_rx);
    open_tx.closed().await;
}

/// The answer a connection over the caps gets before it is closed.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 10\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// Open files this process may still give to connections.
fn descriptor_budget() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    match limit.current {
        Some(n) => usize::try_from(n.saturating_sub(FD_RESERVE).max(16)).unwrap_or(usize::MAX),
        None => usize::MAX,
    }
}

/// Connections held, in all and per client address.
#[derive(Default)]
struct Held {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// One held connection's place in [`Held`], given back on drop.
struct Permit {
    held: Arc<Mutex<Held>>,
    ip: IpAddr,
}

/// Why a connection was not held.
#[derive(Debug, thiserror::Error)]
enum Full {
    #[error("{0} connections from this address are open (the per-address cap)")]
    Address(usize),
    #[error("{0} connections are open (the server's cap)")]
    Total(usize),
}

impl Permit {
    fn take(
        held: &Arc<Mutex<Held>>,
        ip: IpAddr,
        per_address: usize,
        total: usize,
    ) -> Result<Self, Full> {
        let mut h = held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = h.by_address.get(&ip).copied().unwrap_or(0);
        if mine >= per_address {
            return Err(Full::Address(mine));
        }
        if h.total >= total {
            return Err(Full::Total(h.total));
        }
        h.total += 1;
        *h.by_address.entry(ip).or_insert(0) += 1;
        Ok(Permit {
            held: held.clone(),
            ip,
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        h.total -= 1;
        if let Some(n) = h.by_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                h.by_address.remove(&self.ip);
            }
        }
    }
}

/// One accepted connection and what it needs to be served.
struct Connection {
    peer: SocketAddr,
    app: axum::Router,
    limits: Limits,
    stopping: CancellationToken,
    _permit: Permit,
    _open: tokio::sync::watch::Receiver<()>,
}

impl Connection {
    async fn serve(self, tcp: TcpStream, tls: Option<TlsAcceptor>) {
        let _ = tcp.set_nodelay(true);
        let io = StallLimit::new(tcp, self.limits.stall);
        let Some(tls) = tls else {
            return self.http(io).await;
        };
        let peer = self.peer;
        let handshake = tokio::time::timeout(HANDSHAKE_LIMIT, tls.accept(io));
        let stream = tokio::select! {
            _ = self.stopping.cancelled() => return,
            done = handshake => match done {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return tracing::warn!("TLS handshake with {peer} failed: {e}"),
                Err(_) => return tracing::warn!(
                    "TLS handshake with {peer} took more than {} s",
                    HANDSHAKE_LIMIT.as_secs()
                ),
            },
        };
        self.http(stream).await
    }

    /// HTTP/1.1 on `io` until the client or the deadlines end it, or the server stops.
    async fn http<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let peer = self.peer;
        let service = self
            .app
            .map_request(move |mut req: hyper::Request<Incoming>| {
                // What `ConnectInfo<SocketAddr>` extracts, as axum's own serve would insert it.
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.head_deadline);
        let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        let mut conn = std::pin::pin!(conn);
        let ended = tokio::select! {
            ended = conn.as_mut() => ended,
            _ = self.stopping.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(e) = ended {
            tracing::debug!("connection from {peer} ended: {e}");
        }
    }
}

/// A stream whose writes fail once the peer has taken nothing for `limit` while there was
/// something to send: a stalled response is cut, a slow one that progresses never is.
pub(super) struct StallLimit<T> {
    inner: T,
    limit: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    armed: bool,
}

impl<T> StallLimit<T> {
    pub(super) fn new(inner: T, limit: Duration) -> Self {
        StallLimit {
            inner,
            limit,
            timer: Box::pin(tokio::time::sleep(limit)),
            armed: false,
        }
    }

    /// Starts the stall clock when a write waits, stops it when one goes through.
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        wrote: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if wrote.is_ready() {
            self.armed = false;
            return wrote;
        }
        if !self.armed {
            self.armed = true;
            let deadline = tokio::time::Instant::now() + self.limit;
            self.timer.as_mut().reset(deadline);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client took no bytes for {} s",
                    self.limit.as_secs_f32()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallLimit<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallLimit<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let wrote = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, wrote)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let wrote = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, wrote)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caps_hold_per_address_and_in_all_and_give_back_on_drop() {
        let held = Arc::new(Mutex::new(Held::default()));
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = Permit::take(&held, a, 2, 3).unwrap();
        let _second = Permit::take(&held, a, 2, 3).unwrap();
        assert!(matches!(
            Permit::take(&held, a, 2, 3),
            Err(Full::Address(2))
        ));
        let _third = Permit::take(&held, b, 2, 3).unwrap();
        assert!(matches!(Permit::take(&held, b, 2, 3), Err(Full::Total(3))));
        drop(first);
        Permit::take(&held, a, 2, 3).unwrap();
    }
}

//! A listener whose connections exist only while a host is up: the rendezvous host's API is
//! there from node 0's first boot until it reboots into the cluster, the cluster API only from
//! then on. While the gate is closed, new connections are accepted and dropped at once and open
//! ones fail their next read with a reset, which is what a client of a rebooting machine sees
//! (pooled keep-alive connections included).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Whether the host behind a listener is up.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<AtomicBool>);

impl Gate {
    /// Opens or closes the gate.
    pub fn set(&self, open: bool) {
        self.0.store(open, Ordering::SeqCst);
    }

    /// Whether it is open.
    pub fn is_open(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A TCP stream that fails once its gate closes.
pub struct GatedStream {
    inner: TcpStream,
    gate: Gate,
}

fn reset() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "the host went down")
}

impl AsyncRead for GatedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.gate.is_open() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for GatedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.gate.is_open() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A plain listener behind a gate.
pub struct GatedListener {
    inner: TcpListener,
    gate: Gate,
}

impl GatedListener {
    /// `listener` (already bound, made non-blocking here) behind `gate`.
    pub fn new(listener: std::net::TcpListener, gate: Gate) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        Ok(GatedListener {
            inner: TcpListener::from_std(listener)?,
            gate,
        })
    }

    async fn next(&mut self) -> (GatedStream, std::net::SocketAddr) {
        loop {
            match self.inner.accept().await {
                Ok((s, _)) if !self.gate.is_open() => drop(s),
                Ok((s, addr)) => {
                    let _ = s.set_nodelay(true);
                    let gate = self.gate.clone();
                    return (GatedStream { inner: s, gate }, addr);
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

impl axum::serve::Listener for GatedListener {
    type Io = GatedStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.next().await
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A TLS listener behind a gate: the handshake is made here (bounded to five seconds; a
/// failed one is dropped and the next connection taken).
pub struct GatedTlsListener {
    plain: GatedListener,
    acceptor: AcceptorFn,
}

/// Where a TLS listener gets its acceptor, when a connection comes (the certificate may be
/// learnt after the listener was bound); `None` drops the connection.
pub type AcceptorFn = Arc<dyn Fn() -> Option<tokio_rustls::TlsAcceptor> + Send + Sync>;

impl GatedTlsListener {
    /// `listener` serving TLS with `acceptor`, behind `gate`.
    pub fn new(
        listener: std::net::TcpListener,
        gate: Gate,
        acceptor: AcceptorFn,
    ) -> io::Result<Self> {
        Ok(GatedTlsListener {
            plain: GatedListener::new(listener, gate)?,
            acceptor,
        })
    }
}

impl axum::serve::Listener for GatedTlsListener {
    type Io = tokio_rustls::server::TlsStream<GatedStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = self.plain.next().await;
            let Some(acceptor) = (self.acceptor)() else {
                continue;
            };
            let handshake = acceptor.accept(stream);
            if let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(5), handshake).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.plain.inner.local_addr()
    }
}

//! A scripted HTTP/1.1 server on 127.0.0.1, plain or TLS: the deliberately hostile registry,
//! token realm or "storage" host of the trust tests. Every request it reads is recorded (method,
//! target, its `Authorization` header, body length) and answered by the test's closure, so a
//! test can say exactly what reached a host that should have seen nothing. It reads
//! `Content-Length` bodies, answers with `Connection: close`, and stops when dropped.

use std::io;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use super::tls::TestPki;

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// The `Authorization` header, when one was sent.
    pub authorization: Option<String>,
    /// Body bytes read: a blob sent where it should not go shows here.
    pub body_len: usize,
    /// The body's first [`BODY_KEPT`] bytes.
    pub body: Vec<u8>,
}

/// How much of a request's body [`Seen`] keeps.
pub const BODY_KEPT: usize = 64 << 10;

/// What the server answers.
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
    /// After `body`, bytes generated as they are written, so a huge answer costs the server
    /// nothing: until the declared length is reached or the client hangs up.
    pub generated: Option<Generated>,
}

/// A body generated as it is written (see [`Answer::generated`]).
#[derive(Clone, Copy, Debug)]
pub enum Generated {
    /// `Content-Length: N` declared, and N bytes written (unless the client goes first).
    Declared(u64),
    /// `Transfer-Encoding: chunked`, with no end.
    EndlessChunks,
}

impl Answer {
    /// An answer with no extra header and no body.
    pub fn status(status: u16) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            generated: None,
        }
    }

    /// After the body, bytes generated as written (JSON-ish filler, `{"f":"xx..."},` repeated).
    pub fn generated(mut self, how: Generated) -> Answer {
        self.generated = Some(how);
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Answer {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Answer {
        self.body = body.into();
        self
    }
}

type Script = dyn Fn(&Seen) -> Answer + Send + Sync;

/// A running scripted server; stopped on drop.
pub struct Scripted {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Scripted {
    /// A plain-HTTP server answering by `script`.
    pub fn plain(script: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Scripted {
        Self::start(None, Arc::new(script))
    }

    /// An HTTPS server presenting `pki`'s server certificate (names `127.0.0.1` and
    /// `localhost`), answering by `script`.
    pub fn tls(
        pki: &TestPki,
        script: impl Fn(&Seen) -> Answer + Send + Sync + 'static,
    ) -> Scripted {
        let config = pki
            .rustls_server_config()
            .expect("TLS server configuration");
        Self::start(
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
            Arc::new(script),
        )
    }

    fn start(acceptor: Option<tokio_rustls::TlsAcceptor>, script: Arc<Script>) -> Scripted {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
        std_listener.set_nonblocking(true).unwrap();
        let port = std_listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let seen2 = seen.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                loop {
                    let (stream, _) = tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => match accepted {
                            Ok(a) => a,
                            Err(_) => continue,
                        },
                    };
                    let (acceptor, script, seen) =
                        (acceptor.clone(), script.clone(), seen2.clone());
                    tokio::spawn(async move {
                        let _ = match acceptor {
                            Some(a) => match a.accept(stream).await {
                                Ok(tls) => serve(tls, &*script, &seen).await,
                                Err(e) => Err(e),
                            },
                            None => serve(stream, &*script, &seen).await,
                        };
                    });
                }
            });
        });
        Scripted {
            port,
            seen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every request read so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request, records it, writes the script's answer, closes.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    script: &Script,
    seen: &Mutex<Vec<Seen>>,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if buf.len() > 64 * 1024 {
            return Ok(());
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_string();
    let target = request_line.next().unwrap_or_default().to_string();
    let mut authorization = None;
    let mut length = 0usize;
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "authorization" {
                authorization = Some(v.to_string());
            } else if k == "content-length" {
                length = v.parse().unwrap_or(0);
            }
        }
    }
    let mut body_len = buf.len() - head_end;
    let mut body: Vec<u8> = buf[head_end..].iter().take(BODY_KEPT).copied().collect();
    while body_len < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        let room = BODY_KEPT.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..n.min(room)]);
        body_len += n;
    }
    let request = Seen {
        method,
        target,
        authorization,
        body_len,
        body,
    };
    seen.lock().unwrap().push(request.clone());
    let answer = script(&request);
    let length = match answer.generated {
        None => format!("Content-Length: {}", answer.body.len()),
        Some(Generated::Declared(n)) => format!("Content-Length: {n}"),
        Some(Generated::EndlessChunks) => "Transfer-Encoding: chunked".to_string(),
    };
    let mut out = format!(
        "HTTP/1.1 {} Scripted\r\n{length}\r\nConnection: close\r\n",
        answer.status
    );
    for (k, v) in &answer.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    stream.write_all(out.as_bytes()).await?;
    if request.method != "HEAD" {
        match answer.generated {
            None => stream.write_all(&answer.body).await?,
            Some(how) => generate(&mut stream, &answer.body, how).await?,
        }
    }
    stream.flush().await?;
    stream.shutdown().await
}

/// Writes `start`, then filler, as `how` says, until done or the client hangs up.
async fn generate<S: AsyncWrite + Unpin>(
    stream: &mut S,
    start: &[u8],
    how: Generated,
) -> io::Result<()> {
    let mut filler = Vec::with_capacity(64 * 1024);
    while filler.len() < 64 * 1024 - 80 {
        filler.extend_from_slice(
            br#"{"f":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},"#,
        );
    }
    match how {
        Generated::Declared(total) => {
            stream.write_all(start).await?;
            let mut left = total.saturating_sub(start.len() as u64);
            while left > 0 {
                let n = left.min(filler.len() as u64) as usize;
                stream.write_all(&filler[..n]).await?;
                left -= n as u64;
            }
            Ok(())
        }
        Generated::EndlessChunks => {
            if !start.is_empty() {
                stream
                    .write_all(format!("{:x}\r\n", start.len()).as_bytes())
                    .await?;
                stream.write_all(start).await?;
                stream.write_all(b"\r\n").await?;
            }
            let head = format!("{:x}\r\n", filler.len());
            loop {
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(&filler).await?;
                stream.write_all(b"\r\n").await?;
            }
        }
    }
}

//! A static HTTP file server on 127.0.0.1 for tests that need plain web content (a Helm chart
//! repository: `index.yaml` and chart archives): GET and HEAD of exact paths, 404 otherwise,
//! one request per connection (`Connection: close`), over plain HTTP or HTTPS with a per-run
//! CA ([`FileServer::start_tls`]). It records every path asked for, and stops when dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio_rustls::rustls::{ServerConfig, ServerConnection, StreamOwned};

/// A running file server.
pub struct FileServer {
    addr: std::net::SocketAddr,
    https: bool,
    stop: Arc<AtomicBool>,
    requests: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl FileServer {
    /// Serves `files` (path -> body) on a free port over plain HTTP.
    pub fn start(files: BTreeMap<String, Vec<u8>>) -> FileServer {
        Self::serve(files, BTreeMap::new(), None)
    }

    /// Answers each path of `redirects` with `302 Found` to its URL (404 otherwise), over
    /// HTTPS with `pki`'s certificate when given.
    pub fn redirecting(
        redirects: BTreeMap<String, String>,
        pki: Option<&super::tls::TestPki>,
    ) -> FileServer {
        let tls = pki.map(|p| Arc::new(p.rustls_server_config().expect("TLS config")));
        Self::serve(BTreeMap::new(), redirects, tls)
    }

    /// Serves `files` over HTTPS with `pki`'s server certificate (for `127.0.0.1`).
    pub fn start_tls(files: BTreeMap<String, Vec<u8>>, pki: &super::tls::TestPki) -> FileServer {
        let config = pki
            .rustls_server_config()
            .expect("the file server's TLS config");
        Self::serve(files, BTreeMap::new(), Some(Arc::new(config)))
    }

    fn serve(
        files: BTreeMap<String, Vec<u8>>,
        redirects: BTreeMap<String, String>,
        tls: Option<Arc<ServerConfig>>,
    ) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the file server");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (stop.clone(), requests.clone());
        let https = tls.is_some();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let _ = match &tls {
                    // A client that refuses the certificate ends the handshake: nothing recorded.
                    Some(config) => ServerConnection::new(config.clone())
                        .map_err(std::io::Error::other)
                        .and_then(|tls| {
                            answer(StreamOwned::new(tls, conn), &files, &redirects, &r)
                        }),
                    None => answer(conn, &files, &redirects, &r),
                };
            }
        });
        FileServer {
            addr,
            https,
            stop,
            requests,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT` (or `https://`).
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Every path requested, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer(
    mut conn: impl Read + Write,
    files: &BTreeMap<String, Vec<u8>>,
    redirects: &BTreeMap<String, String>,
    requests: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut line = String::new();
    {
        // A GET or HEAD has no body: nothing past the head is left in this reader.
        let mut reader = BufReader::new(&mut conn);
        reader.read_line(&mut line)?;
        // Headers are read and ignored.
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
                break;
            }
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    requests.lock().unwrap().push(path.clone());
    let out = &mut conn;
    if let Some(to) = redirects.get(&path) {
        write!(
            out,
            "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?;
        return out.flush();
    }
    match files.get(&path) {
        Some(body) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            if method != "HEAD" {
                out.write_all(body)?;
            }
        }
        None => write!(
            out,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?,
    }
    out.flush()
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

//! The store over HTTP, as the API server's REST paths and verbs: `GET` (get, list with
//! `labelSelector`, `as=Table`), `POST`, `PUT`, `PATCH` (apply, merge, JSON and — as a merge —
//! strategic merge patches), `DELETE`, with `fieldManager`, `force`, `dryRun=All` and
//! `fieldValidation`; bearer tokens map to users (`Auth`). Unknown fields pruned under
//! `fieldValidation=Warn` come back as `Warning` headers. Watches are not served.

use super::discovery;
use super::kinds::KindInfo;
use super::store::{ApiError, ObjectRef, Op, Outcome, Store, WriteOptions};
use super::table;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Bearer tokens (by their sha256, hex) and the users they authenticate.
#[derive(Clone, Default)]
pub struct Auth {
    tokens: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Auth {
    /// Lets the token whose sha256 is `sha256_hex` in as `user` (`system:admin` is in
    /// system:masters; `system:serviceaccount:NS:NAME` a service account).
    pub fn add_token(&self, sha256_hex: &str, user: &str) {
        let mut t = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        t.insert(sha256_hex.to_ascii_lowercase(), user.to_string());
    }

    fn user(&self, headers: &HeaderMap) -> Option<String> {
        let token = headers
            .get("authorization")?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?;
        let sha = bootstrap::oci::digest::Digest::of(token.trim().as_bytes());
        self.tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sha.hex())
            .cloned()
    }
}

/// The API: a store and who may use it.
#[derive(Clone)]
pub struct Api {
    /// The objects.
    pub store: Store,
    /// The tokens.
    pub auth: Auth,
}

fn reply(code: u16, body: &Value) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    super::super::json_response(code, body)
}

fn error(e: &ApiError) -> Response {
    reply(e.code, &e.to_status())
}

/// An axum router answering every path from `api`.
pub fn router(api: Api) -> axum::Router {
    axum::Router::new()
        .fallback(
            |axum::extract::State(api): axum::extract::State<Api>,
             method: Method,
             uri: Uri,
             headers: HeaderMap,
             body: axum::body::Bytes| async move {
                respond(&api, &method, &uri, &headers, &body)
            },
        )
        .with_state(api)
}

/// One request's answer.
pub fn respond(
    api: &Api,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let Some(user) = api.auth.user(headers) else {
        return error(&ApiError::new(401, "Unauthorized", "Unauthorized".into()));
    };
    let path = uri.path().trim_end_matches('/');
    let kinds = api.store.kinds();
    let found = match path {
        "/version" => Some(discovery::version()),
        "/api" => Some(discovery::core_versions()),
        "/apis" => Some(discovery::groups(&kinds)),
        "/api/v1" => discovery::resources(&kinds, "", "v1"),
        "/openapi/v3" => Some(discovery::openapi_index(&kinds)),
        p if p.starts_with("/openapi/v3/") => {
            discovery::openapi_document(&kinds, &p["/openapi/v3/".len()..])
        }
        p => p
            .strip_prefix("/apis/")
            .and_then(|gv| gv.split_once('/'))
            .filter(|(_, v)| !v.contains('/'))
            .and_then(|(g, v)| discovery::resources(&kinds, g, v)),
    };
    if let Some(doc) = found {
        return reply(200, &doc);
    }
    let Some(target) = parse_path(path, &kinds) else {
        return error(&ApiError::new(
            404,
            "NotFound",
            format!(
                "the server could not find the requested resource ({} {path})",
                method.as_str()
            ),
        ));
    };
    let q = query(uri);
    match serve_resource(api, &target, method, &q, headers, body, &user) {
        Ok(r) => r,
        Err(e) => error(&e),
    }
}

/// A resource path: `/api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]]` or the same under
/// `/apis/GROUP/VERSION`.
struct Target {
    kind: KindInfo,
    api_version: String,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_path(path: &str, kinds: &[KindInfo]) -> Option<Target> {
    let (group, version, rest) = if let Some(rest) = path.strip_prefix("/api/v1/") {
        ("", "v1", rest)
    } else {
        let rest = path.strip_prefix("/apis/")?;
        let mut it = rest.splitn(3, '/');
        (it.next()?, it.next()?, it.next()?)
    };
    let mut parts: Vec<&str> = rest.split('/').collect();
    let mut namespace = None;
    if parts.len() >= 3 && parts[0] == "namespaces" {
        namespace = Some(parts[1].to_string());
        parts.drain(..2);
    }
    let kind = kinds.iter().find(|k| {
        k.group == group && k.plural == parts[0] && k.versions.iter().any(|v| v == version)
    })?;
    if parts.len() > 3 {
        return None;
    }
    let api_version = kind.api_version(version);
    Some(Target {
        kind: kind.clone(),
        api_version,
        namespace,
        name: parts.get(1).map(|s| (*s).to_string()),
        sub: parts.get(2).map(|s| (*s).to_string()),
    })
}

fn query(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn body_value(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::new(400, "BadRequest", format!("the body is not UTF-8: {e}")))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ApiError::new(400, "BadRequest", format!("error decoding YAML: {e}")))
}

/// The path's namespace and name, set in (or checked against) the body's.
fn placed(mut obj: Value, t: &Target) -> Result<Value, ApiError> {
    if !obj.is_object() {
        return Err(ApiError::new(
            400,
            "BadRequest",
            "the body is not an object".into(),
        ));
    }
    if let Some(ns) = t.namespace.as_deref().filter(|_| t.kind.namespaced) {
        match obj["metadata"]["namespace"].as_str() {
            Some(b) if b != ns => {
                return Err(ApiError::new(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request".into()));
            }
            _ => obj["metadata"]["namespace"] = json!(ns),
        }
    }
    if let Some(name) = &t.name {
        match obj["metadata"]["name"].as_str() {
            Some(b) if b != name => {
                return Err(ApiError::new(
                    400,
                    "BadRequest",
                    "the name of the object does not match the name on the URL".into(),
                ));
            }
            _ => obj["metadata"]["name"] = json!(name),
        }
    }
    if obj["apiVersion"].is_null() {
        obj["apiVersion"] = json!(t.api_version);
    }
    Ok(obj)
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.split(',').next().unwrap_or_default().contains("as=Table"))
}

fn written(out: Outcome, ignore_warnings: bool) -> Response {
    let mut r = reply(out.code, &out.object);
    if !ignore_warnings {
        for w in &out.warnings {
            let quoted = serde_json::to_string(w).unwrap_or_default();
            if let Ok(v) = HeaderValue::from_str(&format!("299 - {quoted}")) {
                r.headers_mut().append("warning", v);
            }
        }
    }
    r
}

fn serve_resource(
    api: &Api,
    t: &Target,
    method: &Method,
    q: &BTreeMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    user: &str,
) -> Result<Response, ApiError> {
    let flag = |k: &str| q.get(k).map(String::as_str);
    let o = WriteOptions {
        field_manager: flag("fieldManager").unwrap_or_default().to_string(),
        force: flag("force") == Some("true"),
        dry_run: flag("dryRun") == Some("All"),
        strict: flag("fieldValidation") == Some("Strict"),
        user: user.to_string(),
    };
    let ignore = flag("fieldValidation") == Some("Ignore");
    let r = ObjectRef {
        api_version: t.api_version.clone(),
        kind: t.kind.kind.clone(),
        namespace: t.namespace.clone(),
        name: t.name.clone().unwrap_or_default(),
    };
    let sub = t.sub.as_deref();
    let store = &api.store;
    let content_type = headers
        .get("content-type")
        .and_then(|c| c.to_str().ok())
        .unwrap_or_default();
    let out = match (method.as_str(), &t.name) {
        ("GET", Some(_)) => {
            let obj = store.get_as(&r, user, sub)?;
            return Ok(if wants_table(headers) {
                reply(200, &table::table(&t.kind, &[obj], store.revision()))
            } else {
                reply(200, &obj)
            });
        }
        ("GET", None) if flag("watch").is_some_and(|w| w == "true" || w == "1") => {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                "the lab's cluster API stand-in does not serve watches".into(),
            ));
        }
        ("GET", None) => return list(api, t, flag("labelSelector"), headers, user),
        ("POST", None) => store.write(Op::Create(placed(body_value(body)?, t)?), &o, None)?,
        ("PUT", Some(_)) => store.write(Op::Replace(placed(body_value(body)?, t)?), &o, sub)?,
        ("PATCH", Some(_)) => {
            let patch = body_value(body)?;
            let op = match content_type.split(';').next().unwrap_or_default() {
                "application/apply-patch+yaml" => Op::Apply(placed(patch, t)?),
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => Op::MergePatch(r.clone(), patch),
                "application/json-patch+json" => Op::JsonPatch(r.clone(), patch),
                other => return Err(ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (not {other:?})"))),
            };
            store.write(op, &o, sub)?
        }
        ("DELETE", Some(_)) => Outcome {
            object: store.delete(&r, &o)?,
            code: 200,
            warnings: Vec::new(),
        },
        _ => {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                format!(
                    "the server does not allow this method on the requested resource ({} {})",
                    method, t.kind.plural
                ),
            ))
        }
    };
    Ok(written(out, ignore))
}

fn list(
    api: &Api,
    t: &Target,
    selector: Option<&str>,
    headers: &HeaderMap,
    user: &str,
) -> Result<Response, ApiError> {
    let items = api.store.list_as(
        &t.api_version,
        &t.kind.kind,
        t.namespace.as_deref(),
        selector,
        user,
    )?;
    let rev = api.store.revision();
    if wants_table(headers) {
        return Ok(reply(200, &table::table(&t.kind, &items, rev)));
    }
    Ok(reply(
        200,
        &json!({"kind": format!("{}List", t.kind.kind), "apiVersion": t.api_version,
        "metadata": {"resourceVersion": rev.to_string()}, "items": items}),
    ))
}

/// The API on loopback, for tests and the lab's helpers: TLS with a lab CA, a kubeconfig
/// with an admin token. Stops when dropped.
pub struct LoopbackApi {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// `dir/kubeconfig`: the server, the CA, the admin token.
    pub kubeconfig: std::path::PathBuf,
    /// The objects it serves.
    pub store: Store,
    /// Its tokens (add controllers' tokens here).
    pub auth: Auth,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LoopbackApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `store` over TLS on 127.0.0.1 (a free port), writing `dir/kubeconfig` (and
/// `dir/ca.crt`) for the admin.
pub async fn serve_loopback(store: Store, dir: &std::path::Path) -> anyhow::Result<LoopbackApi> {
    use anyhow::Context as _;
    let ca = super::super::pki::LabCa::generate()?;
    let ip: std::net::IpAddr = [127, 0, 0, 1].into();
    let server = ca.server(&[ip], &["localhost".to_string()])?;
    let listener =
        std::net::TcpListener::bind((ip, 0)).context("binding the lab cluster API on 127.0.0.1")?;
    let addr = listener.local_addr()?;
    let acceptor = super::super::cluster_api::tls_acceptor(&server.cert, &server.key)?;
    let gate = super::super::gate::Gate::default();
    gate.set(true);
    let accept: super::super::gate::AcceptorFn = Arc::new(move || Some(acceptor.clone()));
    let tls = super::super::gate::GatedTlsListener::new(listener, gate, accept)?;
    let auth = Auth::default();
    let token = random_token();
    auth.add_token(
        bootstrap::oci::digest::Digest::of(token.as_bytes()).hex(),
        super::rbac::ADMIN,
    );
    let app = router(Api {
        store: store.clone(),
        auth: auth.clone(),
    });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(tls, app).await {
            tracing::warn!("the loopback cluster API stopped: {e}");
        }
    });
    fs_err::create_dir_all(dir)?;
    let kubeconfig = dir.join("kubeconfig");
    fs_err::write(dir.join("ca.crt"), &ca.pem.cert)?;
    fs_err::write(
        &kubeconfig,
        kubeconfig_text(&format!("https://{addr}"), &ca.pem.cert, &token),
    )?;
    Ok(LoopbackApi {
        addr,
        kubeconfig,
        store,
        auth,
        task,
    })
}

/// A random bearer token (32 bytes, hex).
pub fn random_token() -> String {
    let mut b = [0u8; 32];
    let _ = aws_lc_rs::rand::fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A kubeconfig for `server` trusting `ca_pem`, authenticating with `token`.
pub fn kubeconfig_text(server: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: admin\n  context:\n    cluster: lab\n    user: admin\n    namespace: default\n\
         current-context: admin\n"
    )
}

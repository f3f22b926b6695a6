//! The Streamable HTTP transport (`serve --http ADDR`): `rmcp`'s Streamable
//! HTTP service at [`ENDPOINT`] behind an authentication middleware
//! ([`authenticate`]), `GET /healthz` beside it ([`healthz`]), its own accept
//! loop ([`accept`]), the drain on stop ([`Serving`]), and `doctor`'s line
//! ([`doctor_line`]). Each principal is served from its own client.
//!
//! Not for: the tokens and the places in flight ([`auth`]); the checks of a
//! JSON-RPC message ([`crate::wire::refusal`]); any tool or the wording of
//! replies (`tools`, `render`); the server's life (`serve`).
//!
//! Invariants:
//! - Only a request with a right token reaches `rmcp` or has its body read
//!   ([`authenticate`]).
//! - A protocol session belongs to the principal that opened it ([`Owners`]).
//! - A principal has at most [`MAX_IN_FLIGHT`] calls in flight; one more is
//!   refused at once, never queued ([`authenticate`], [`Held`]).
//! - `Host` and `Origin` are always checked ([`serve`]).
//! - Connections, request heads and bodies are bounded in number, size and
//!   time ([`accept`], [`authenticate`]).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::auth::{self, InFlight, Slot, Tokens};
use crate::config::HttpConfig;
use crate::render::{self, HttpRefusal};
use crate::tools::{self, Core, Principal};

/// The MCP endpoint.
pub(crate) const ENDPOINT: &str = "/mcp";

/// The health probe's path.
pub(crate) const HEALTH: &str = "/healthz";

/// The largest request body, in bytes: stdio's longest line (4 MiB).
pub(crate) const MAX_BODY: usize = crate::wire::MAX_LINE;

/// The most calls one principal may have in flight: stdio's bound.
/// Principals are the configured ones (at most [`auth::MAX_PRINCIPALS`]).
pub(crate) const MAX_IN_FLIGHT: usize = crate::wire::MAX_IN_FLIGHT;

/// The most HTTP connections open at once.
pub(crate) const MAX_CONNECTIONS: usize = 512;

/// How long a client may take to send a request's head (hyper's limits
/// bound its size), and how long a connection kept alive between requests
/// may sit idle.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client may take to send a request's body (else 408).
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long responses may still flow once every session is stopped,
/// before what is open is cut.
pub(crate) const DRAIN: Duration = Duration::from_secs(5);

/// The JSON-RPC code of a call refused because its principal has
/// [`MAX_IN_FLIGHT`] in flight (an implementation-defined server error).
pub(crate) const TOO_MANY_CALLS: i64 = -32000;

/// The bound socket, before anything is served: binding is the first
/// thing `serve --http` does, so that an address in use stops start-up
/// before any shell starts.
pub(crate) struct Listening {
    listener: tokio::net::TcpListener,
    /// The address bound (its port chosen when asked for port 0).
    pub addr: SocketAddr,
}

/// Binds `config`'s address.
pub(crate) async fn bind(config: &HttpConfig) -> anyhow::Result<Listening> {
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .with_context(|| format!("--http {}: cannot listen there", config.addr))?;
    let addr = listener.local_addr().context("the bound address")?;
    Ok(Listening { listener, addr })
}

/// The tokens to check: `config`'s, or a fresh one written into a private
/// file (mode 0600) in `runtime_dir`, whose path is printed on stderr. The
/// token itself is never printed.
pub(crate) fn tokens(config: &HttpConfig, runtime_dir: &Path) -> anyhow::Result<Tokens> {
    if let Some(tokens) = &config.tokens {
        return Ok(tokens.clone());
    }
    let path = runtime_dir.join("http-token");
    let tokens =
        Tokens::generate(&path.display().to_string()).context("cannot generate a token")?;
    let (_, token) = &tokens.entries()[0];
    shellkeep_engine::write_new_file(&path, format!("{token}\n").as_bytes())
        .with_context(|| format!("cannot write the token to {}", path.display()))?;
    Ok(tokens)
}

/// The `Host` values and `Origin`s a server bound at `addr` answers
/// besides the flags': its loopback names (`127.0.0.1:PORT`,
/// `localhost:PORT`, `[::1]:PORT`) and their origins, and the bound address
/// itself unless it is a wildcard (`0.0.0.0`, `::`).
pub(crate) fn bound_names(addr: SocketAddr) -> (Vec<String>, Vec<String>) {
    let port = addr.port();
    let mut hosts =
        vec![format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")];
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        hosts.push(match addr.ip() {
            IpAddr::V4(ip) => format!("{ip}:{port}"),
            IpAddr::V6(ip) => format!("[{ip}]:{port}"),
        });
    }
    let origins = hosts.iter().map(|host| format!("http://{host}")).collect();
    (hosts, origins)
}

/// `doctor`'s line on the HTTP transport: what `--http` would bind and
/// how it would authenticate, from its checked flags (`Ok(None)`: no
/// `--http`), or why it would not start.
pub(crate) fn doctor_line(checked: Result<Option<HttpConfig>, String>) -> String {
    let config = match checked {
        Ok(Some(config)) => config,
        Ok(None) => {
            return "http: off (serve --http ADDR serves MCP over Streamable HTTP, with bearer \
                    tokens)"
                .to_owned();
        }
        Err(err) => return format!("http: FAILS ({err})"),
    };
    let how = match &config.tokens {
        None => "a bearer token generated at start into a private file of the runtime \
                 directory"
            .to_owned(),
        Some(tokens) => {
            let names: Vec<&str> = tokens.names().collect();
            format!("the bearer tokens of {} ({})", tokens.origin, names.join(", "))
        }
    };
    let reach = if config.addr.ip().is_loopback() { "this host only" } else { "remote clients" };
    format!(
        "http: would serve http://{}{ENDPOINT} to {reach}, authenticating with {how}; Origin \
         and Host checked",
        config.addr
    )
}

/// What the authentication middleware checks against.
struct Gate {
    tokens: Tokens,
    in_flight: Arc<InFlight>,
    owners: std::sync::Mutex<Owners>,
}

/// The most protocol sessions whose principal is remembered.
const MAX_OWNED: usize = 4096;

/// The principal that opened each 2025-11-25 protocol session (by its
/// `Mcp-Session-Id`): a request of another principal naming it is refused
/// as an unknown session, so that nobody can post into, listen to or end
/// another's session. At most [`MAX_OWNED`] are remembered, the oldest
/// forgotten first (`rmcp` closes a session idle for 5 minutes; a
/// forgotten one is no longer checked).
#[derive(Default)]
struct Owners {
    by_id: std::collections::HashMap<String, String>,
    order: std::collections::VecDeque<String>,
}

impl Owners {
    /// Whether `principal` may use session `id` (unknown ones pass: `rmcp`
    /// answers them).
    fn allows(&self, id: &str, principal: &str) -> bool {
        self.by_id.get(id).is_none_or(|owner| owner == principal)
    }

    /// Session `id` was opened by `principal`.
    fn opened(&mut self, id: String, principal: String) {
        if self.by_id.insert(id.clone(), principal).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > MAX_OWNED {
            if let Some(oldest) = self.order.pop_front() {
                self.by_id.remove(&oldest);
            }
        }
    }

    /// Session `id` was ended.
    fn ended(&mut self, id: &str) {
        if self.by_id.remove(id).is_some() {
            self.order.retain(|known| known != id);
        }
    }
}

/// The HTTP server, running.
///
/// Stopping is [`Serving::stop_accepting`], then [`Serving::finish`]: the
/// listener closes first; the caller then stops every session (so calls in
/// flight end and are answered over their open streams), and what is still
/// open after [`DRAIN`] is cut.
pub(crate) struct Serving {
    /// The server's task: ends once every connection has closed.
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    /// Closes the listener (axum's graceful shutdown).
    accepting: CancellationToken,
    /// Ends `rmcp`'s response streams and protocol sessions.
    streams: CancellationToken,
}

/// Serves MCP on `listening` from `core`, checking `tokens`, until
/// [`Serving::stop_accepting`]. `config` gives the extra hosts and origins.
///
/// Both protocol eras are served: a 2026-07-28 client statelessly (each
/// request carries its own metadata), a 2025-11-25 client in the protocol
/// session its `initialize` opens (`legacy_session_mode`). Only [`HEALTH`]
/// and [`ENDPOINT`] are routed; anything else is 404.
///
/// After [`authenticate`], `rmcp` checks that `Host` is one of
/// [`bound_names`] or an `--allowed-host`, and that a present `Origin` is
/// one of their origins or an `--allowed-origin` (validation always on, as
/// the specification requires); either wrong, 403.
pub(crate) fn serve(
    listening: Listening,
    config: &HttpConfig,
    tokens: Tokens,
    core: Arc<Core>,
) -> Serving {
    let (mut hosts, mut origins) = bound_names(listening.addr);
    hosts.extend(config.allowed_hosts.iter().cloned());
    origins.extend(config.allowed_origins.iter().cloned());
    let streams = CancellationToken::new();
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY)
        .with_legacy_session_mode(true)
        .with_cancellation_token(streams.clone());
    let service = StreamableHttpService::new(
        move || Ok(tools::Shellkeep::new(Arc::clone(&core))),
        Arc::new(LocalSessionManager::default()),
        mcp_config,
    );
    let gate = Arc::new(Gate {
        tokens,
        in_flight: InFlight::new(MAX_IN_FLIGHT),
        owners: std::sync::Mutex::new(Owners::default()),
    });
    let mcp = axum::Router::new()
        .route_service(ENDPOINT, service)
        .route_layer(axum::middleware::from_fn_with_state(gate, authenticate));
    let app = axum::Router::new().route(HEALTH, axum::routing::get(healthz)).merge(mcp);
    let accepting = CancellationToken::new();
    let task = tokio::spawn(accept(listening.listener, app, accepting.clone()));
    Serving { task, accepting, streams }
}

/// Accepts connections on `listener` and serves `app` on each (HTTP/1.1),
/// at most [`MAX_CONNECTIONS`] at once (beyond, new ones wait in the
/// kernel's backlog), each request's head within [`HEAD_TIMEOUT`], until
/// `accepting` is cancelled; then lets every connection finish its
/// request in flight (graceful shutdown) and returns once all are closed.
async fn accept(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    accepting: CancellationToken,
) -> std::io::Result<()> {
    let places = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let place = tokio::select! {
            place = Arc::clone(&places).acquire_owned() => place,
            () = accepting.cancelled() => break,
        };
        let Ok(place) = place else { break };
        let stream = tokio::select! {
            accepted = listener.accept() => accepted,
            () = accepting.cancelled() => break,
        };
        let stream = match stream {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of descriptors, say: wait a little instead of spinning.
                tracing::warn!("cannot accept an HTTP connection: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let stop = accepting.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEAD_TIMEOUT);
            let connection =
                builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = served {
                tracing::debug!("an HTTP connection ended: {err}");
            }
            drop(place);
        });
    }
    drop(listener);
    // Every place back: every connection closed.
    let _ = places.acquire_many(MAX_CONNECTIONS as u32).await;
    Ok(())
}

impl Serving {
    /// Waits until the server fails (it never ends on its own otherwise).
    pub(crate) async fn failed(&mut self) -> anyhow::Error {
        match (&mut self.task).await {
            Ok(Ok(())) => anyhow::anyhow!("the HTTP server ended"),
            Ok(Err(err)) => anyhow::Error::from(err).context("the HTTP server failed"),
            Err(err) => anyhow::Error::from(err).context("the HTTP server failed"),
        }
    }

    /// Closes the listener: no new connection is accepted; requests in
    /// flight go on.
    pub(crate) fn stop_accepting(&self) {
        self.accepting.cancel();
    }

    /// Lets responses still in flight go out for up to [`DRAIN`], then
    /// ends every stream and session that is left.
    pub(crate) async fn finish(mut self) {
        self.accepting.cancel();
        if tokio::time::timeout(DRAIN, &mut self.task).await.is_err() {
            self.streams.cancel();
            if tokio::time::timeout(DRAIN, &mut self.task).await.is_err() {
                tracing::warn!("HTTP connections still open after {DRAIN:?}; they are cut");
                self.task.abort();
            }
        }
    }
}

/// `GET /healthz`: the process serves. It answers 200 `ok` to anyone, with
/// no authentication and no other detail, for orchestrators' probes.
async fn healthz() -> &'static str {
    "ok"
}

/// The header that names a 2025-11-25 protocol session.
const SESSION_ID: &str = "mcp-session-id";

impl Gate {
    fn owners(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The parts of a JSON-RPC message the middleware looks at.
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
}

/// The middleware in front of [`ENDPOINT`]. Each request goes through, in
/// order:
///
/// 1. the bearer token ([`auth`]): missing or wrong, 401 ([`unauthorized`]);
///    right, the request carries its principal ([`Principal`]) into `rmcp`'s
///    request context, and the handler serves it from that principal's
///    client (its sessions, `run` outputs and tasks); a request naming
///    another principal's protocol session (`Mcp-Session-Id`) is refused as
///    an unknown session (404, see [`Owners`]);
/// 2. for a POST, its body, read whole within [`BODY_TIMEOUT`] and up to
///    [`MAX_BODY`] (beyond, 413), and checked as stdio's wire checks a line
///    ([`crate::wire::refusal`]: not JSON, -32700; not a JSON-RPC message or
///    a batch, -32600; a known method's bad parameters, -32602; an unknown
///    method, -32601; each with the same words, see [`refused`]); a request
///    (a method and an id) takes one of its principal's [`MAX_IN_FLIGHT`]
///    places ([`Held`]), and without one it is answered at once with a
///    JSON-RPC error that says so ([`too_many_calls`]), never queued;
/// 3. `rmcp`'s own checks of `Host` and `Origin` (see [`serve`]).
///
/// Only a request with a right token has its body read.
async fn authenticate(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| auth::bearer(value.as_bytes()))
        .filter(|token| token.len() <= auth::MAX_TOKEN);
    let Some(principal) = presented.and_then(|token| gate.tokens.principal(token)) else {
        let why = if presented.is_some() { "wrong token" } else { "no bearer token" };
        tracing::info!("refused an HTTP request: {why}");
        return unauthorized(presented.is_some());
    };
    let principal = principal.to_owned();
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(Principal(principal.clone()));
    let session = parts.headers.get(SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(id) = &session
        && !gate.owners().allows(id, &principal)
    {
        return (StatusCode::NOT_FOUND, render::http_refusal(&HttpRefusal::NoSuchSession))
            .into_response();
    }
    if parts.method == Method::DELETE {
        let response = next.run(Request::from_parts(parts, body)).await;
        if let Some(id) = &session
            && response.status().is_success()
        {
            gate.owners().ended(id);
        }
        return response;
    }
    if parts.method != Method::POST {
        return next.run(Request::from_parts(parts, body)).await;
    }
    // Refused before a byte of it is read (and before a client that asked
    // `Expect: 100-continue` is told to send it).
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    if declared
        .and_then(|length| length.trim().parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY as u64)
    {
        return too_large();
    }
    let read = tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await;
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(err)) if is_length_limit(&err) => return too_large(),
        Ok(Err(err)) => {
            let why = render::http_refusal(&HttpRefusal::UnreadableBody(&err.to_string()));
            return (StatusCode::BAD_REQUEST, why).into_response();
        }
        Err(_) => {
            let why = render::http_refusal(&HttpRefusal::BodyTimeout(BODY_TIMEOUT));
            return (StatusCode::REQUEST_TIMEOUT, why).into_response();
        }
    };
    // A message that is not fit for `rmcp` gets the error stdio gives it.
    if let Some((id, code, message)) = crate::wire::refusal(&bytes) {
        return refused(id, code, &message);
    }
    let peek = serde_json::from_slice::<Peek>(&bytes).ok();
    let slot = match peek {
        Some(Peek { id: Some(id), method: Some(_) }) => match gate.in_flight.admit(&principal) {
            Some(slot) => Some(slot),
            None => return too_many_calls(id),
        },
        _ => None,
    };
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    // An `initialize` opened a protocol session: it is this principal's.
    if session.is_none()
        && let Some(id) = response.headers().get(SESSION_ID).and_then(|v| v.to_str().ok())
    {
        gate.owners().opened(id.to_owned(), principal);
    }
    match slot {
        Some(slot) => response.map(|body| Body::new(Held { body, slot: Some(slot) })),
        None => response,
    }
}

/// Whether reading a body failed on [`MAX_BODY`].
fn is_length_limit(err: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = source {
        if current.to_string().contains("length limit exceeded") {
            return true;
        }
        source = current.source();
    }
    false
}

/// 401, with the challenge that names the scheme (`WWW-Authenticate:
/// Bearer`).
fn unauthorized(wrong: bool) -> Response {
    let body =
        render::http_refusal(if wrong { &HttpRefusal::WrongToken } else { &HttpRefusal::NoToken });
    let mut response = (StatusCode::UNAUTHORIZED, body).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"shellkeep\""));
    response
}

/// A JSON-RPC error for a message `rmcp` is not given, with the status
/// `rmcp` gives the same code: 404 for an unknown method, 200 for bad
/// parameters, 400 for what is not a JSON-RPC request at all.
fn refused(id: serde_json::Value, code: i64, message: &str) -> Response {
    let status = match code {
        -32601 => StatusCode::NOT_FOUND,
        -32602 => StatusCode::OK,
        _ => StatusCode::BAD_REQUEST,
    };
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    });
    let mut response = (status, error.to_string()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// 413 for a body past [`MAX_BODY`].
fn too_large() -> Response {
    (StatusCode::PAYLOAD_TOO_LARGE, render::http_refusal(&HttpRefusal::TooLarge(MAX_BODY)))
        .into_response()
}

/// The JSON-RPC error for a call past its principal's [`MAX_IN_FLIGHT`],
/// with the request's id (HTTP 200, as `rmcp` answers JSON-RPC errors).
fn too_many_calls(id: serde_json::Value) -> Response {
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": TOO_MANY_CALLS,
            "message": format!(
                "this client already has {MAX_IN_FLIGHT} calls in flight, the most it may have: \
                 this call was not run. Wait for one to end (or cancel one), then call again."
            ),
        },
    });
    let mut response = (StatusCode::OK, error.to_string()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A response body that holds its call's place among its principal's
/// calls in flight until it has been sent whole, or dropped (the client
/// went away).
///
/// A client that closes a call's response stream cancels the call, as
/// `notifications/cancelled` does on stdio: a terminal command keeps
/// running and the next call reports everything.
struct Held {
    body: Body,
    slot: Option<Slot>,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.slot.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback bind answers its loopback names at its port; a specific
    /// address adds itself; a wildcard adds nothing it cannot know.
    /// A session is its opener's; ended or unknown ones pass to `rmcp`; the
    /// oldest are forgotten past the bound.
    #[test]
    fn protocol_sessions_belong_to_their_principal() {
        let mut owners = Owners::default();
        owners.opened("s1".into(), "alice".into());
        assert!(owners.allows("s1", "alice"));
        assert!(!owners.allows("s1", "bob"));
        assert!(owners.allows("unknown", "bob"));
        owners.ended("s1");
        assert!(owners.allows("s1", "bob"));
        for n in 0..=MAX_OWNED {
            owners.opened(format!("s{n}"), "alice".into());
        }
        assert_eq!(owners.by_id.len(), MAX_OWNED);
        assert!(owners.allows("s0", "bob"), "the oldest is forgotten");
        assert!(!owners.allows(&format!("s{MAX_OWNED}"), "bob"));
    }

    #[test]
    fn bound_names_are_the_loopback_names_and_the_address() {
        let (hosts, origins) = bound_names("127.0.0.1:8765".parse().unwrap());
        assert_eq!(hosts, ["127.0.0.1:8765", "localhost:8765", "[::1]:8765"]);
        assert_eq!(
            origins,
            ["http://127.0.0.1:8765", "http://localhost:8765", "http://[::1]:8765"]
        );
        let (hosts, _) = bound_names("10.1.2.3:80".parse().unwrap());
        assert_eq!(hosts.last().unwrap(), "10.1.2.3:80");
        let (hosts, _) = bound_names("[fd00::1]:80".parse().unwrap());
        assert_eq!(hosts.last().unwrap(), "[fd00::1]:80");
        let (hosts, _) = bound_names("0.0.0.0:80".parse().unwrap());
        assert_eq!(hosts.len(), 3);
    }
}

//! Mock model servers for the end-to-end tests that drive the real agent
//! CLIs: the Anthropic Messages API (SSE streaming), the OpenAI Responses
//! API (SSE) and Chat Completions (JSON), and the Gemini API
//! (`generateContent`, `streamGenerateContent?alt=sse`).
//!
//! A server listens on 127.0.0.1 only, on a port of its own, for the life
//! of one test, and follows one [`Scenario`]: the model's first turn calls
//! the CLI's file-writing tool for a path relative to the agent's working
//! directory (found in the request, where the CLI states it), its next turn
//! ends the turn; or every request fails with an HTTP status; or the stream
//! breaks; or the server stops answering after the tool call. Requests the
//! CLIs make on the side (session titles, routing, commit messages) get a
//! short answer that reports no tokens, so the tokens a test expects are
//! exactly those of the scripted turns ([`TURN_USAGE`] each).
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections at once, request bodies
//! up to [`MAX_BODY`] bytes, idle connections closed after a timeout, and
//! the listener stops when the server is dropped.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// Connections served at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 32;
/// Largest request body read (Claude Code's first request is ~200 KB).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// Tokens one scripted turn reports: (input, cached input, output).
pub const TURN_USAGE: (u64, u64, u64) = (1200, 300, 40);

/// Which API the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAiResponses,
    OpenAiChat,
    Gemini,
}

/// What the model does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scenario {
    /// Turn 1 writes `path` (relative to the agent's working directory)
    /// with `content`; turn 2 ends the turn.
    WriteFile { path: String, content: String },
    /// Every model request is answered with this HTTP status.
    Status(u16),
    /// The stream breaks off with garbage in the middle of a turn.
    Malformed,
    /// Turn 1 writes the file; every later request gets no answer.
    HangAfterTool { path: String, content: String },
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Whether it was a scripted model turn (not a side request).
    pub turn: bool,
}

struct Shared {
    api: Api,
    scenario: Scenario,
    seen: Mutex<Vec<Seen>>,
    stop: AtomicBool,
    open: AtomicUsize,
    ids: AtomicUsize,
    /// Whether the scripted tool call was sent (Aider's conversation
    /// carries example exchanges, so its history does not tell).
    tool_sent: AtomicBool,
}

/// A running mock server; stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockServer {
    /// Starts a server for `api` playing `scenario`.
    pub fn start(api: Api, scenario: Scenario) -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("address");
        let shared = Arc::new(Shared {
            api,
            scenario,
            seen: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            ids: AtomicUsize::new(1),
            tool_sent: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::spawn(move || accept_loop(listener, s));
        MockServer {
            addr,
            shared,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().expect("log lock").clone()
    }

    /// How many scripted model turns were answered.
    pub fn turns(&self) -> usize {
        self.seen().iter().filter(|s| s.turn).count()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A URL where nothing listens (a port that was free a moment ago).
pub fn dead_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("address");
    drop(l);
    format!("http://{addr}")
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                if shared.open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    drop(stream);
                    continue;
                }
                shared.open.fetch_add(1, Ordering::SeqCst);
                let s = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &s);
                    s.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// One parsed request.
struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            return Ok(None);
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                length = v.parse().unwrap_or(0);
            } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            if n == 0 {
                let mut end = String::new();
                reader.read_line(&mut end)?;
                break;
            }
            if body.len() + n > MAX_BODY {
                return Err(std::io::Error::other("body too large"));
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        if length > MAX_BODY {
            return Err(std::io::Error::other("body too large"));
        }
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    Ok(Some(Request { method, path, body }))
}

fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    while let Some(req) = read_request(&mut reader)? {
        let reply = respond(&req, shared);
        match reply {
            Reply::Full {
                status,
                content_type,
                body,
            } => {
                let head = format!(
                    "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n",
                    reason(status),
                    body.len()
                );
                writer.write_all(head.as_bytes())?;
                writer.write_all(&body)?;
                writer.flush()?;
            }
            Reply::Broken { content_type, body } => {
                // A stream that promises more than it sends, then closes.
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len() + 4096
                );
                writer.write_all(head.as_bytes())?;
                writer.write_all(&body)?;
                writer.flush()?;
                return Ok(());
            }
            Reply::Hang => {
                // Headers, then silence until the test ends.
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
                writer.write_all(head.as_bytes())?;
                writer.flush()?;
                while !shared.stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                return Ok(());
            }
        }
    }
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

enum Reply {
    Full {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
    Broken {
        content_type: &'static str,
        body: Vec<u8>,
    },
    Hang,
}

fn json_reply(status: u16, v: Value) -> Reply {
    Reply::Full {
        status,
        content_type: "application/json",
        body: v.to_string().into_bytes(),
    }
}

fn sse_reply(events: Vec<(Option<&str>, Value)>) -> Reply {
    Reply::Full {
        status: 200,
        content_type: "text/event-stream",
        body: sse(&events).into_bytes(),
    }
}

fn sse(events: &[(Option<&str>, Value)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if let Some(n) = name {
            out.push_str(&format!("event: {n}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out
}

/// The agent's working directory, as the CLI states it in the request.
fn workdir(api: Api, body: &str) -> Option<String> {
    let patterns: &[&str] = match api {
        Api::Anthropic => &["orking directory: "],
        Api::OpenAiResponses => &["<cwd>"],
        Api::Gemini => &[
            "Workspace Directories:**\\n  - ",
            "Workspace Directories:\\n  - ",
        ],
        Api::OpenAiChat => &[],
    };
    for p in patterns {
        if let Some(i) = body.find(p) {
            let rest = &body[i + p.len()..];
            let end = rest
                .find(|c: char| c == '<' || c == '"' || c == '\\' || c.is_whitespace())
                .unwrap_or(rest.len());
            return Some(rest[..end].to_owned());
        }
    }
    None
}

fn absolute(api: Api, body: &str, path: &str) -> String {
    match workdir(api, body) {
        Some(w) => format!("{w}/{path}"),
        None => path.to_owned(),
    }
}

fn next_id(shared: &Shared) -> usize {
    shared.ids.fetch_add(1, Ordering::SeqCst)
}

/// Whether this request comes after the scripted tool call (it carries
/// the tool's result).
fn after_tool(api: Api, v: &Value) -> bool {
    let text = v.to_string();
    match api {
        Api::Anthropic => text.contains("\"tool_result\""),
        Api::OpenAiResponses => text.contains("\"function_call_output\""),
        Api::Gemini => text.contains("\"functionResponse\""),
        Api::OpenAiChat => false,
    }
}

/// Whether the request is one the CLI makes on the side rather than the
/// agent's conversation.
fn side_request(api: Api, req: &Request, v: &Value) -> bool {
    match api {
        Api::Anthropic => v["tools"].as_array().is_none_or(Vec::is_empty),
        Api::Gemini => !req.path.contains("streamGenerateContent"),
        Api::OpenAiResponses => {
            v["tools"].as_array().is_none_or(Vec::is_empty)
                && v["input"]
                    .as_array()
                    .is_none_or(|i| !i.iter().any(|x| x["type"] == "additional_tools"))
        }
        Api::OpenAiChat => {
            let t = v.to_string().to_lowercase();
            t.contains("commit message") || t.contains("summarize")
        }
    }
}

fn respond(req: &Request, shared: &Shared) -> Reply {
    let api = shared.api;
    let body = String::from_utf8_lossy(&req.body).into_owned();
    let v: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    if req.method != "POST" {
        shared.seen.lock().expect("log").push(Seen {
            method: req.method.clone(),
            path: req.path.clone(),
            turn: false,
        });
        // HEAD (Claude Code's reachability check) and GET: no body.
        return Reply::Full {
            status: 200,
            content_type: "text/plain",
            body: Vec::new(),
        };
    }
    let side = side_request(api, req, &v);
    let turn = !side;
    shared.seen.lock().expect("log").push(Seen {
        method: req.method.clone(),
        path: req.path.clone(),
        turn: turn && !matches!(shared.scenario, Scenario::Status(_)),
    });
    if let Scenario::Status(code) = shared.scenario {
        return error(api, code);
    }
    // After the scripted tool call, a hanging server answers nothing,
    // not even the CLI's side requests (Aider's commit message).
    if matches!(shared.scenario, Scenario::HangAfterTool { .. })
        && shared.tool_sent.load(Ordering::SeqCst)
        && (side || api != Api::OpenAiChat)
    {
        return Reply::Hang;
    }
    if side {
        return side_reply(api, req, &v, shared);
    }
    let model = model_of(api, req, &v);
    let second = after_tool(api, &v) || shared.tool_sent.swap(true, Ordering::SeqCst);
    match (&shared.scenario, second) {
        (Scenario::Malformed, _) => malformed(api),
        (Scenario::HangAfterTool { .. }, true) => Reply::Hang,
        (
            Scenario::WriteFile { path, content } | Scenario::HangAfterTool { path, content },
            false,
        ) => tool_turn(
            api,
            &model,
            &absolute(api, &body, path),
            path,
            content,
            shared,
        ),
        (_, true) => final_turn(api, &model, shared),
        (Scenario::Status(_), false) => unreachable!("answered above"),
    }
}

fn error(api: Api, code: u16) -> Reply {
    let (kind, message) = match code {
        401 => ("authentication_error", "invalid x-api-key"),
        403 => ("permission_error", "permission denied"),
        429 => ("rate_limit_error", "Rate limit reached for requests"),
        529 => ("overloaded_error", "Overloaded"),
        503 => ("overloaded_error", "The server is overloaded"),
        _ => ("api_error", "Internal server error"),
    };
    match api {
        Api::Anthropic => json_reply(
            code,
            json!({"type":"error","error":{"type":kind,"message":message}}),
        ),
        Api::OpenAiResponses | Api::OpenAiChat => {
            let (t, c) = match code {
                401 => ("invalid_request_error", "invalid_api_key"),
                429 => ("requests", "rate_limit_exceeded"),
                _ => ("server_error", "server_error"),
            };
            let message = if code == 401 {
                "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys."
            } else {
                message
            };
            json_reply(
                code,
                json!({"error":{"message":message,"type":t,"param":null,"code":c}}),
            )
        }
        Api::Gemini => {
            let status = match code {
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            let message = if code == 401 {
                "API key not valid. Please pass a valid API key."
            } else {
                message
            };
            json_reply(
                code,
                json!({"error":{"code":code,"message":message,"status":status}}),
            )
        }
    }
}

fn usage_anthropic(report: bool) -> (Value, u64) {
    let (i, c, o) = if report { TURN_USAGE } else { (0, 0, 0) };
    (
        json!({"input_tokens": i - c, "cache_read_input_tokens": c, "cache_creation_input_tokens": 0, "output_tokens": 1}),
        o,
    )
}

fn anthropic_message(
    model: &str,
    id: usize,
    block: Value,
    deltas: Vec<Value>,
    stop: &str,
    report: bool,
) -> Vec<(Option<&'static str>, Value)> {
    let (usage, out) = usage_anthropic(report);
    let mut events = vec![
        (
            Some("message_start"),
            json!({"type":"message_start","message":{"id":format!("msg_mock{id}"),"type":"message","role":"assistant","model":model,"content":[],"stop_reason":null,"stop_sequence":null,"usage":usage}}),
        ),
        (
            Some("content_block_start"),
            json!({"type":"content_block_start","index":0,"content_block":block}),
        ),
    ];
    for d in deltas {
        events.push((
            Some("content_block_delta"),
            json!({"type":"content_block_delta","index":0,"delta":d}),
        ));
    }
    events.push((
        Some("content_block_stop"),
        json!({"type":"content_block_stop","index":0}),
    ));
    events.push((
        Some("message_delta"),
        json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":{"output_tokens":out}}),
    ));
    events.push((Some("message_stop"), json!({"type":"message_stop"})));
    events
}

fn openai_usage(report: bool) -> Value {
    let (i, c, o) = if report { TURN_USAGE } else { (0, 0, 0) };
    json!({"input_tokens": i, "input_tokens_details": {"cached_tokens": c}, "output_tokens": o, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": i + o})
}

fn responses_events(
    model: &str,
    id: usize,
    item: Value,
    report: bool,
) -> Vec<(Option<&'static str>, Value)> {
    let resp = |status: &str, output: Value| json!({"id":format!("resp_mock{id}"),"object":"response","created_at":1_700_000_000,"status":status,"model":model,"output":output,"usage": if status == "completed" { openai_usage(report) } else { Value::Null }});
    vec![
        (
            Some("response.created"),
            json!({"type":"response.created","sequence_number":0,"response":resp("in_progress", json!([]))}),
        ),
        (
            Some("response.output_item.added"),
            json!({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":item}),
        ),
        (
            Some("response.output_item.done"),
            json!({"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":item}),
        ),
        (
            Some("response.completed"),
            json!({"type":"response.completed","sequence_number":3,"response":resp("completed", json!([item]))}),
        ),
    ]
}

fn gemini_chunk(model: &str, parts: Value, report: bool) -> Value {
    let (i, c, o) = if report { TURN_USAGE } else { (0, 0, 0) };
    json!({
        "candidates":[{"content":{"role":"model","parts":parts},"finishReason":"STOP","index":0}],
        "usageMetadata":{"promptTokenCount":i,"cachedContentTokenCount":c,"candidatesTokenCount":o,"totalTokenCount":i+o},
        "modelVersion":model
    })
}

fn chat_reply(model: &str, id: usize, text: &str, report: bool) -> Reply {
    let (i, c, o) = if report { TURN_USAGE } else { (0, 0, 0) };
    json_reply(
        200,
        json!({
            "id": format!("chatcmpl-mock{id}"), "object": "chat.completion", "created": 1_700_000_000, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o, "prompt_tokens_details": {"cached_tokens": c}}
        }),
    )
}

fn tool_turn(api: Api, model: &str, abs: &str, rel: &str, content: &str, shared: &Shared) -> Reply {
    let id = next_id(shared);
    match api {
        Api::Anthropic => {
            let input = json!({"file_path": abs, "content": content}).to_string();
            sse_reply(anthropic_message(
                model,
                id,
                json!({"type":"tool_use","id":format!("toolu_mock{id}"),"name":"Write","input":{}}),
                vec![json!({"type":"input_json_delta","partial_json":input})],
                "tool_use",
                true,
            ))
        }
        Api::OpenAiResponses => {
            let dir = std::path::Path::new(rel)
                .parent()
                .map(|p| p.to_string_lossy().into_owned())
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| ".".into());
            let cmd = format!(
                "mkdir -p '{dir}' && printf '%s\\n' '{}' > '{rel}'",
                content.replace('\'', "'\\''")
            );
            let item = json!({"type":"function_call","id":format!("fc_mock{id}"),"call_id":format!("call_mock{id}"),"name":"exec_command","arguments":json!({"cmd": cmd}).to_string(),"status":"completed"});
            sse_reply(responses_events(model, id, item, true))
        }
        Api::Gemini => {
            let chunk = gemini_chunk(
                model,
                json!([{"functionCall":{"name":"write_file","args":{"file_path":abs,"content":content}}}]),
                true,
            );
            sse_reply(vec![(None, chunk)])
        }
        Api::OpenAiChat => {
            // Aider's "whole" edit format: the path, then the whole file.
            let text = format!("{rel}\n```\n{content}\n```\n");
            chat_reply(model, id, &text, true)
        }
    }
}

fn final_turn(api: Api, model: &str, shared: &Shared) -> Reply {
    let id = next_id(shared);
    let done = "Done: the file is written.";
    match api {
        Api::Anthropic => sse_reply(anthropic_message(
            model,
            id,
            json!({"type":"text","text":""}),
            vec![json!({"type":"text_delta","text":done})],
            "end_turn",
            true,
        )),
        Api::OpenAiResponses => {
            let item = json!({"type":"message","id":format!("msg_mock{id}"),"role":"assistant","status":"completed","content":[{"type":"output_text","text":done,"annotations":[]}]});
            sse_reply(responses_events(model, id, item, true))
        }
        Api::Gemini => sse_reply(vec![(
            None,
            gemini_chunk(model, json!([{"text": done}]), true),
        )]),
        Api::OpenAiChat => chat_reply(model, id, done, true),
    }
}

/// The model a request asks for: in the body, or (Gemini) in the path.
fn model_of(api: Api, req: &Request, v: &Value) -> String {
    if api == Api::Gemini
        && let Some(rest) = req.path.split("/models/").nth(1)
    {
        return rest.split(':').next().unwrap_or("mock-model").to_owned();
    }
    v["model"].as_str().unwrap_or("mock-model").to_owned()
}

fn side_reply(api: Api, req: &Request, v: &Value, shared: &Shared) -> Reply {
    let id = next_id(shared);
    let model = model_of(api, req, v);
    match api {
        Api::Anthropic => sse_reply(anthropic_message(
            &model,
            id,
            json!({"type":"text","text":""}),
            vec![json!({"type":"text_delta","text":"{\"title\": \"Mock task\"}"})],
            "end_turn",
            false,
        )),
        Api::OpenAiResponses => {
            let item = json!({"type":"message","id":format!("msg_mock{id}"),"role":"assistant","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]});
            sse_reply(responses_events(&model, id, item, false))
        }
        Api::Gemini => {
            // Routing and next-speaker checks ask for JSON.
            let text = json!({"reasoning": "mock", "model_choice": "flash", "next_speaker": "user", "complexity_score": 1}).to_string();
            json_reply(200, gemini_chunk(&model, json!([{"text": text}]), false))
        }
        Api::OpenAiChat => chat_reply(&model, id, "Add the requested file", false),
    }
}

fn malformed(api: Api) -> Reply {
    let body = match api {
        Api::Anthropic => "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_broken\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {not json at all\n\n".to_owned(),
        Api::OpenAiResponses => "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_broken\",\"status\":\"in_progress\",\"output\":[]}}\n\nevent: response.output_item.added\ndata: {broken json\n\n".to_owned(),
        Api::Gemini => "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"par\"}]}}]}\n\ndata: {broken json\n\n".to_owned(),
        Api::OpenAiChat => "{\"id\":\"chatcmpl-broken\",\"choices\":[{\"message\":".to_owned(),
    };
    let content_type = if api == Api::OpenAiChat {
        "application/json"
    } else {
        "text/event-stream"
    };
    Reply::Broken {
        content_type,
        body: body.into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_working_directory_each_cli_states() {
        assert_eq!(
            workdir(
                Api::Anthropic,
                r#"{"text":"... working directory: /tmp/w/a-1\nIs"}"#
            )
            .as_deref(),
            Some("/tmp/w/a-1")
        );
        assert_eq!(
            workdir(
                Api::OpenAiResponses,
                "<environment_context>\\n  <cwd>/tmp/x</cwd>"
            )
            .as_deref(),
            Some("/tmp/x")
        );
    }
}

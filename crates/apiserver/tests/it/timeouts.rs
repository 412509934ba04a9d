//! The server's timeouts and its cap on requests in flight, on tokio's paused clock: a client
//! that is slow to send its headers, a connection left idle, and a request whose body never
//! arrives are all ended as kube-apiserver ends them, while a quiet watch is not cut; past the
//! cap a request is turned away at once, and probes and watches are not.

use std::time::Duration;

use ctrlkit_apiserver::faults::Fault;
use ctrlkit_apiserver::rest::RestConfig;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn connect(server: &ApiServer) -> TcpStream {
    TcpStream::connect(server.address()).await.unwrap()
}

/// Reads until the peer closes the connection (or `within` passes): what was read, and
/// whether it closed.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut read = Vec::new();
    let closed = tokio::time::timeout(within, async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(count) => read.extend_from_slice(&buffer[..count]),
            }
        }
    })
    .await
    .is_ok();
    (String::from_utf8_lossy(&read).into_owned(), closed)
}

#[tokio::test(start_paused = true)]
async fn a_client_slow_to_send_its_headers_is_cut_off() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let mut stream = connect(&server).await;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let (_, closed) = read_until_closed(&mut stream, Duration::from_secs(31)).await;
    assert!(!closed, "still waiting for the rest of the headers");
    let (_, closed) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(closed, "cut off after 32 s");
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_closed_after_90_seconds() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let mut stream = connect(&server).await;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 512];
    let count = stream.read(&mut answer).await.unwrap();
    assert!(String::from_utf8_lossy(&answer[..count]).starts_with("HTTP/1.1 200"));
    let (_, closed) = read_until_closed(&mut stream, Duration::from_secs(85)).await;
    assert!(!closed, "kept alive for a while");
    let (_, closed) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
    assert!(closed, "closed once idle for 90 s");
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_arrives_is_answered_504_after_60_seconds() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let mut stream = connect(&server).await;
    let head = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"metadata\"";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 4096];
    let count = tokio::time::timeout(Duration::from_secs(61), stream.read(&mut answer))
        .await
        .expect("answered within the request timeout")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..count]);
    assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
    assert!(
        answer.contains(r#""message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout""#),
        "{answer}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_quiet_watch_outlives_the_idle_and_request_timeouts() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let mut stream = connect(&server).await;
    stream
        .write_all(b"GET /api/v1/namespaces/default/secrets?watch=1&timeoutSeconds=300 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (head, closed) = read_until_closed(&mut stream, Duration::from_secs(200)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!closed, "the watch is still open after 200 quiet seconds");
    // It ends at its own timeout (at 300 s: the stream's last chunk), and the connection, idle
    // from then on, is closed after the idle timeout.
    let (tail, closed) = read_until_closed(&mut stream, Duration::from_secs(300)).await;
    assert!(tail.ends_with("0\r\n\r\n"), "{tail:?}");
    assert!(
        closed,
        "the idle connection is closed once the watch is over"
    );
}

/// Sends `request` on a connection of its own; the answer's head and what followed it within
/// a second.
async fn exchange(server: &ApiServer, request: &str) -> String {
    let mut stream = connect(server).await;
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 8192];
    let count = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut answer))
        .await
        .expect("an answer at once")
        .unwrap();
    String::from_utf8_lossy(&answer[..count]).into_owned()
}

#[tokio::test(start_paused = true)]
async fn past_the_in_flight_cap_requests_are_turned_away_but_not_probes_or_watches() {
    let config = ApiServerConfig {
        rest: RestConfig {
            max_requests_inflight: 1,
            max_mutating_requests_inflight: 1,
            ..RestConfig::default()
        },
        ..ApiServerConfig::default()
    };
    let server = ApiServer::start(config).await.unwrap();
    // One slow list takes the only place for reads.
    server.faults().fail_next(
        1,
        Some("list"),
        Some("configmaps"),
        Fault::Delay(Duration::from_secs(10)),
    );
    let slow = {
        let address = server.address();
        tokio::spawn(async move {
            let mut stream = TcpStream::connect(address).await.unwrap();
            let request = "GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;

    let refused = exchange(
        &server,
        "GET /api/v1/namespaces/default/secrets HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1\r\n"),
        "{refused}"
    );
    assert!(
        refused.ends_with("Too many requests, please try again later.\n"),
        "{refused}"
    );

    let probe = exchange(&server, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(probe.starts_with("HTTP/1.1 200"), "{probe}");
    let watch = exchange(
        &server,
        "GET /api/v1/namespaces/default/secrets?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    assert!(watch.starts_with("HTTP/1.1 200"), "{watch}");
    // Writes have a budget of their own.
    let body = r#"{"metadata":{"name":"w"}}"#;
    let write = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let created = exchange(&server, &write).await;
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");

    // Once the slow list is answered, its place is free again.
    assert!(slow.await.unwrap().starts_with("HTTP/1.1 200"));
    let later = exchange(
        &server,
        "GET /api/v1/namespaces/default/secrets HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    assert!(later.starts_with("HTTP/1.1 200"), "{later}");
}

#[tokio::test(start_paused = true)]
async fn past_the_connection_cap_new_connections_get_one_answer_and_the_open_ones_are_served() {
    let config = ApiServerConfig {
        max_connections: 2,
        ..ApiServerConfig::default()
    };
    let server = ApiServer::start(config).await.unwrap();
    let list = "GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n\r\n";
    // Two connections take the places (each answered once, and kept open).
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut stream = connect(&server).await;
        stream.write_all(list.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 16384];
        let count = stream.read(&mut answer).await.unwrap();
        assert!(String::from_utf8_lossy(&answer[..count]).starts_with("HTTP/1.1 200"));
        open.push(stream);
    }
    // A third gets 429 and is closed; a probe on a new connection is still answered.
    let refused = exchange(&server, list).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("connection: close"),
        "{refused}"
    );
    let probe = exchange(&server, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(probe.starts_with("HTTP/1.1 200"), "{probe}");
    // The open connections are served as before.
    open[0].write_all(list.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 16384];
    let count = open[0].read(&mut answer).await.unwrap();
    assert!(String::from_utf8_lossy(&answer[..count]).starts_with("HTTP/1.1 200"));
    // One of them closed, a new connection is served in full again.
    drop(open.pop());
    let mut served = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        served = exchange(&server, list).await;
        if served.starts_with("HTTP/1.1 200") {
            break;
        }
    }
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
}

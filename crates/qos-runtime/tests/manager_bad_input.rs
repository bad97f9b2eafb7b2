//! Hostile input at both edges of the manager service: random and truncated messages
//! thrown at the master's HTTP endpoints and at the agent's Unix socket get error
//! replies, change nothing, and crash nothing.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::{mbps, Cluster, SECRET, TWO_SWITCHES};
use proptest::prelude::*;
use qos_core::besteffort::Policy;
use qos_runtime::client::LocalFlow;
use qos_runtime::protocol::{LocalReply, MAX_JOB_LINE_BYTES, MAX_LINE_BYTES};

/// A cluster with two flows, so "no state change" is checked against something.
fn cluster() -> Cluster {
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, Duration::from_secs(60));
    c.agent("a");
    let mut app = c.client("a");
    app.request_bandwidth(&LocalFlow::new(0, "c", 0), mbps(20.0))
        .unwrap();
    app.best_effort(&LocalFlow::new(1, "b", 0), 1).unwrap();
    c
}

/// One raw HTTP/1.1 exchange; returns the status code (0 if the server closed first).
fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let _ = s.write_all(req.as_bytes());
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}

fn auth() -> Vec<(&'static str, String)> {
    vec![
        ("clusterqos-protocol", "1".into()),
        ("authorization", format!("Bearer {SECRET}")),
        ("content-type", "application/json".into()),
    ]
}

const VALID_REQUEST: &str = r#"{"flow":{"src":{"node":"a","port":9},"dst":{"node":"c","port":0},"priority":0},"class":{"type":"premium","bandwidth":1000000},"owner":{"uid":0,"pid":1}}"#;
const VALID_LINE: &str = r#"{"v":1,"op":"request","src_port":9,"dst":{"node":"c","port":0},"class":{"type":"premium","bandwidth":1000000}}"#;

fn addr(c: &Cluster) -> String {
    c.url.trim_start_matches("http://").to_string()
}

#[test]
fn master_refuses_missing_version_wrong_version_and_missing_token() {
    let c = cluster();
    let a = addr(&c);
    let (code, text) = http(&a, "GET", "/v1/status", &[], b"");
    assert_eq!(code, 400);
    assert!(
        text.contains("version_mismatch") && text.contains("speaks protocol version 1"),
        "{text}"
    );
    let (code, text) = http(
        &a,
        "GET",
        "/v1/status",
        &[("clusterqos-protocol", "7".into())],
        b"",
    );
    assert_eq!(code, 400);
    assert!(text.contains("protocol version 7 not supported"), "{text}");
    let (code, _) = http(
        &a,
        "GET",
        "/v1/status",
        &[("clusterqos-protocol", "1".into())],
        b"",
    );
    assert_eq!(code, 401);
    let (code, _) = http(&a, "GET", "/v1/status", &auth(), b"");
    assert_eq!(code, 200);
    let (code, text) = http(&a, "GET", "/v1/version", &[], b"");
    assert_eq!(code, 200);
    assert!(text.contains("\"protocol\":1"));
    // The metrics endpoint counts the refusals above and shows utilisation.
    let (code, text) = http(&a, "GET", "/metrics", &[], b"");
    assert_eq!(code, 200);
    assert!(text.contains("clusterqos_errors_total 3"), "{text}");
    assert!(text.contains("clusterqos_grants_total{class=\"premium\"} 1"));
    assert!(text.contains("clusterqos_rejections_total{criterion=\"switch-port\"} 0"));
    assert!(
        text.contains(
            "clusterqos_utilisation{kind=\"node\",name=\"a\",direction=\"send\"} 0.244499"
        ),
        "{text}"
    );
}

#[test]
fn master_refuses_oversized_bodies_unknown_nodes_and_out_of_range_values() {
    let c = cluster();
    let a = addr(&c);
    let before = c.master_flows();
    let big = vec![b'x'; 64 * 1024];
    let (code, _) = http(&a, "POST", "/v1/agents/a/flows", &auth(), &big);
    assert_eq!(code, 413);
    let unknown = VALID_REQUEST.replace("\"c\"", "\"zz\"");
    let (code, text) = http(
        &a,
        "POST",
        "/v1/agents/a/flows",
        &auth(),
        unknown.as_bytes(),
    );
    assert_eq!(code, 404, "{text}");
    assert!(text.contains("no node 'zz'"));
    let zero = VALID_REQUEST.replace("1000000", "0");
    let (code, _) = http(&a, "POST", "/v1/agents/a/flows", &auth(), zero.as_bytes());
    assert_eq!(code, 400);
    let huge = VALID_REQUEST.replace("1000000", "18446744073709551615");
    let (code, _) = http(&a, "POST", "/v1/agents/a/flows", &auth(), huge.as_bytes());
    assert_eq!(code, 400);
    let (code, _) = http(
        &a,
        "POST",
        "/v1/agents/b/flows",
        &auth(),
        VALID_REQUEST.as_bytes(),
    );
    assert_eq!(code, 400, "an agent may not request for another node");
    assert_eq!(c.master_flows(), before);
}

#[test]
fn agent_refuses_oversized_lines_and_keeps_serving() {
    let c = cluster();
    let mut s = UnixStream::connect(c.socket("a")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // A whole line over the limit of lines other than a job's: refused, and the
    // connection goes on.
    let mut long = format!(
        r#"{{"v":1,"op":"flows","pad":"{}"}}"#,
        "x".repeat(MAX_LINE_BYTES)
    );
    long.push('\n');
    s.write_all(long.as_bytes()).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let r: LocalReply = serde_json::from_str(&line).unwrap();
    assert!(!r.ok);
    assert!(
        r.error.unwrap().message.contains("over 16384 bytes"),
        "{line}"
    );
    // A line longer than even a job's may be: refused, and the connection closed.
    let big = vec![b'{'; MAX_JOB_LINE_BYTES + 10];
    let _ = s.write_all(&big);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let r: LocalReply = serde_json::from_str(&line).unwrap();
    assert!(!r.ok);
    assert!(r.error.unwrap().message.contains("over"));
    // A new connection works.
    assert_eq!(c.client("a").flows().unwrap().len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_and_truncated_messages_change_nothing(
        junk in proptest::collection::vec(any::<u8>(), 0..300),
        cut in 0usize..VALID_LINE.len(),
        cut_http in 0usize..VALID_REQUEST.len(),
        path in prop::sample::select(vec![
            "/v1/agents/a/flows", "/v1/agents/a/flows/release", "/v1/agents/a/heartbeat",
            "/v1/agents/a/register", "/v1/agents/%ff/flows", "/v1/nothing",
        ]),
    ) {
        let c = cluster_once();
        let before = c.master_flows();
        let a = addr(c);

        // Master: random body, truncated body, raw garbage on the socket.
        let (code, _) = http(&a, "POST", path, &auth(), &junk);
        prop_assert!(code == 400 || code == 404 || code == 200 || code == 413, "status {code}");
        let (code, _) = http(&a, "POST", "/v1/agents/a/flows", &auth(), &VALID_REQUEST.as_bytes()[..cut_http]);
        prop_assert_eq!(code, 400);
        if let Ok(mut s) = TcpStream::connect(&a) {
            let _ = s.write_all(&junk);
            let _ = s.shutdown(std::net::Shutdown::Write);
            let mut sink = Vec::new();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.read_to_end(&mut sink);
        }

        // Agent: random line, truncated line; each gets an error reply.
        let mut s = UnixStream::connect(c.socket("a")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut reader = BufReader::new(s.try_clone().unwrap());
        for msg in [junk.clone(), VALID_LINE.as_bytes()[..cut].to_vec()] {
            let clean: Vec<u8> = msg.into_iter().filter(|&b| b != b'\n').collect();
            if clean.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            s.write_all(&clean).unwrap();
            s.write_all(b"\n").unwrap();
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let r: LocalReply = serde_json::from_str(&line).unwrap();
            prop_assert!(!r.ok, "accepted {:?}", String::from_utf8_lossy(&clean));
            prop_assert!(!r.error.unwrap().message.is_empty());
        }
        // Nothing changed, everything still answers.
        prop_assert_eq!(c.master_flows(), before);
        prop_assert_eq!(c.client("a").flows().unwrap().len(), 2);
    }
}

/// One cluster shared by all proptest cases (starting one per case would be slow).
fn cluster_once() -> &'static Cluster {
    static C: std::sync::OnceLock<Cluster> = std::sync::OnceLock::new();
    C.get_or_init(cluster)
}

//! The agent ↔ master link over TLS: an agent holding the cluster's CA (and, for
//! mutual TLS, its own certificate) registers, syncs and gets grants; a plain-HTTP
//! peer, an agent without a certificate, and an agent trusting another CA are refused.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{Cluster, TWO_SWITCHES};
use qos_core::besteffort::Policy;
use qos_runtime::client::LocalFlow;
use qos_runtime::master_client::MasterClient;
use qos_runtime::protocol::{Decision, ErrorCode};
use qos_runtime::tls;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// PEM files of one test PKI.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A CA, a server certificate for localhost / 127.0.0.1 and a client certificate,
    /// all issued by it; `name` keeps two PKIs apart.
    fn new(name: &str) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, format!("{name} cluster CA"));
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let write = |file: &str, text: String| std::fs::write(dir.path().join(file), text).unwrap();
        write("ca.pem", ca_cert.pem());
        for (who, sans) in [
            (
                "server",
                vec!["localhost".to_string(), "127.0.0.1".to_string()],
            ),
            ("agent", vec!["agent-a".to_string()]),
        ] {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(sans)
                .unwrap()
                .signed_by(&key, &ca_cert, &ca_key)
                .unwrap();
            write(&format!("{who}.pem"), cert.pem());
            write(&format!("{who}-key.pem"), key.serialize_pem());
        }
        Pki { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }
}

fn master(pki: &Pki) -> Cluster {
    Cluster::start_with(
        TWO_SWITCHES,
        Policy::Thesis,
        Duration::from_secs(30),
        Some(server(pki, true)),
    )
}

/// A client of the master for node `a`, with `tls` when given.
fn client(c: &Cluster, tls: Option<Arc<tls::ClientConfig>>) -> MasterClient {
    let m = c.master_client("a");
    match tls {
        Some(t) => m.with_tls(t).unwrap(),
        None => m,
    }
}

fn server(pki: &Pki, mutual: bool) -> Arc<tls::ServerConfig> {
    let ca = pki.path("ca.pem");
    tls::server_config(
        &pki.path("server.pem"),
        &pki.path("server-key.pem"),
        mutual.then_some(ca.as_path()),
    )
    .unwrap()
}

fn agent_tls(pki: &Pki, with_cert: bool) -> Arc<tls::ClientConfig> {
    let cert = pki.path("agent.pem");
    let key = pki.path("agent-key.pem");
    tls::client_config(
        &pki.path("ca.pem"),
        with_cert.then_some((cert.as_path(), key.as_path())),
    )
    .unwrap()
}

#[test]
fn an_agent_with_the_cluster_ca_and_its_certificate_gets_grants_over_mutual_tls() {
    let pki = Pki::new("ours");
    let mut c = master(&pki);
    c.agent_tls = Some(agent_tls(&pki, true));
    // Waits for the agent's snapshot, which comes over the TLS event stream.
    c.agent("a");
    let d = c
        .client("a")
        .request_bandwidth(&LocalFlow::new(1, "b", 0), 20_000_000)
        .unwrap();
    assert!(matches!(d, Decision::Granted(_)), "{d:?}");
    // The IDT push came back over the same stream.
    assert!(c.wait(|| c.table("a").flows.len() == 1));
}

#[test]
fn plain_http_no_client_certificate_and_a_foreign_ca_are_refused() {
    let pki = Pki::new("ours");
    let m = master(&pki);
    // Plain HTTP to the TLS port: no reply the client can read.
    let plain = MasterClient::new(
        &m.url.replace("https://", "http://"),
        "a",
        &qos_runtime::auth::Secret::new(common::SECRET).unwrap(),
    )
    .unwrap();
    assert_eq!(
        m.rt.block_on(plain.register()).unwrap_err().code,
        ErrorCode::Unavailable
    );
    // https:// without TLS settings: a clear error before anything is sent.
    let e = m.rt.block_on(client(&m, None).register()).unwrap_err();
    assert!(e.message.contains("CA certificate"), "{}", e.message);
    // Mutual TLS: an agent without a certificate is turned away.
    let e =
        m.rt.block_on(client(&m, Some(agent_tls(&pki, false))).register())
            .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{}", e.message);
    // An agent trusting another CA refuses the master's certificate.
    let other = Pki::new("theirs");
    let e =
        m.rt.block_on(client(&m, Some(agent_tls(&other, true))).register())
            .unwrap_err();
    assert!(
        e.message.to_lowercase().contains("certificate"),
        "{}",
        e.message
    );
    // With the right settings the same master answers.
    assert!(m
        .rt
        .block_on(client(&m, Some(agent_tls(&pki, true))).register())
        .is_ok());
}

#[test]
fn unreadable_or_empty_pem_files_are_named_in_the_error() {
    let pki = Pki::new("ours");
    let empty = pki.path("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let e = tls::client_config(&empty, None).err().unwrap().to_string();
    assert!(
        e.contains("empty.pem") && e.contains("no certificate"),
        "{e}"
    );
    let missing = Path::new("/nonexistent/ca.pem");
    let e = tls::client_config(missing, None).err().unwrap().to_string();
    assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    // A key that does not belong to the certificate.
    let e = tls::server_config(&pki.path("server.pem"), &pki.path("agent-key.pem"), None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("server.pem"), "{e}");
}

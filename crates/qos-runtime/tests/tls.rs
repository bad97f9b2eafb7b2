//! The agent ↔ master link over TLS: an agent holding the cluster's CA (and, for
//! mutual TLS, its own certificate) registers, syncs and gets grants; a plain-HTTP
//! peer, an agent without a certificate, and an agent trusting another CA are refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use qos_core::besteffort::Policy;
use qos_runtime::agent;
use qos_runtime::auth::Secret;
use qos_runtime::client::{Client, LocalFlow};
use qos_runtime::manager;
use qos_runtime::master_client::MasterClient;
use qos_runtime::protocol::{Decision, ErrorCode};
use qos_runtime::tls;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

const SECRET: &str = "tls-test-secret-0123456789";

const TOPOLOGY: &str = r#"
[defaults]
t = "48us"
bmax = "81.8MB/s"
link = "160MB/s"

[[switch]]
name = "s0"
ports = 4

[[host]]
name = "a"
port = "s0:0"

[[host]]
name = "b"
port = "s0:1"
"#;

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

struct Master {
    rt: tokio::runtime::Runtime,
    handle: Option<manager::ManagerHandle>,
    dir: tempfile::TempDir,
}

impl Master {
    fn start(server: Arc<tls::ServerConfig>) -> Master {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = manager::Config {
            topology: Arc::new(qos_core::topology::file::load("t.toml", TOPOLOGY).unwrap()),
            db: dir.path().join("m.db"),
            secret: Secret::new(SECRET).unwrap(),
            policy: Policy::Thesis,
            lease: Duration::from_secs(30),
            sync: manager::store::Sync::Normal,
            tls: Some(server),
        };
        let handle = rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            manager::start(config, l).await.unwrap()
        });
        Master {
            rt,
            handle: Some(handle),
            dir,
        }
    }

    fn url(&self) -> String {
        format!("https://{}", self.handle.as_ref().unwrap().addr)
    }

    fn client(&self, client: Option<Arc<tls::ClientConfig>>) -> MasterClient {
        let c = MasterClient::new(&self.url(), "a", &Secret::new(SECRET).unwrap()).unwrap();
        match client {
            Some(t) => c.with_tls(t).unwrap(),
            None => c,
        }
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.shutdown());
        }
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

fn wait(f: impl Fn() -> bool) -> bool {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

#[test]
fn an_agent_with_the_cluster_ca_and_its_certificate_gets_grants_over_mutual_tls() {
    let pki = Pki::new("ours");
    let m = Master::start(server(&pki, true));
    let socket = m.dir.path().join("a.sock");
    let h =
        m.rt.block_on(agent::start(agent::Config {
            node: "a".into(),
            manager: m.url(),
            secret: Secret::new(SECRET).unwrap(),
            socket: socket.clone(),
            tls: Some(agent_tls(&pki, true)),
        }))
        .unwrap();
    let table = h.idt_table();
    assert!(
        wait(|| table.borrow().synced),
        "agent never synced over TLS"
    );
    let mut app = Client::connect(&socket).unwrap();
    let d = app
        .request_bandwidth(&LocalFlow::new(1, "b", 0), 20_000_000)
        .unwrap();
    assert!(matches!(d, Decision::Granted(_)), "{d:?}");
    // The IDT push came back over the TLS event stream.
    assert!(wait(|| table.borrow().flows.len() == 1));
    h.shutdown();
}

#[test]
fn plain_http_no_client_certificate_and_a_foreign_ca_are_refused() {
    let pki = Pki::new("ours");
    let m = Master::start(server(&pki, true));
    // Plain HTTP to the TLS port: no reply the client can read.
    let plain = MasterClient::new(
        &m.url().replace("https://", "http://"),
        "a",
        &Secret::new(SECRET).unwrap(),
    )
    .unwrap();
    assert_eq!(
        m.rt.block_on(plain.register()).unwrap_err().code,
        ErrorCode::Unavailable
    );
    // https:// without TLS settings: a clear error before anything is sent.
    let e = m.rt.block_on(m.client(None).register()).unwrap_err();
    assert!(e.message.contains("CA certificate"), "{}", e.message);
    // Mutual TLS: an agent without a certificate is turned away.
    let e =
        m.rt.block_on(m.client(Some(agent_tls(&pki, false))).register())
            .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{}", e.message);
    // An agent trusting another CA refuses the master's certificate.
    let other = Pki::new("theirs");
    let e =
        m.rt.block_on(m.client(Some(agent_tls(&other, true))).register())
            .unwrap_err();
    assert!(
        e.message.to_lowercase().contains("certificate"),
        "{}",
        e.message
    );
    // With the right settings the same master answers.
    assert!(m
        .rt
        .block_on(m.client(Some(agent_tls(&pki, true))).register())
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

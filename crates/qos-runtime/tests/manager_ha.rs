//! The replicated manager: replicas on etcd elect one leader; a crash of
//! the leader moves the leadership to another replica, which rebuilds the books from
//! etcd alone — flows kept, agents following without an operator, the node kept for
//! the agent instance that held it, unfit grants refusing the term — and a follower
//! never admits. Each replica runs on its own tokio runtime, so that a crash drops
//! every one of its tasks and sockets at once, as `kill -9` would.
//!
//! They need the `etcd` binary (Debian: etcd-server) and are ignored unless asked for
//! (`cargo test -- --ignored etcd::`, which `scripts/test` runs when it can).
#![cfg(feature = "etcd")]

mod common;

mod etcd {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use qos_runtime::agent;
    use qos_runtime::auth::Secret;
    use qos_runtime::client::{Client, LocalFlow};
    use qos_runtime::etcd_local::LocalEtcd;
    use qos_runtime::manager::store::etcd::{EtcdConfig, EtcdStore};
    use qos_runtime::manager::{self, ManagerError, ManagerHandle, StoreConfig};
    use qos_runtime::master_client::MasterClient;
    use qos_runtime::protocol::{Decision, ErrorCode, LEADER_HEADER};

    use super::common::{SECRET, TWO_SWITCHES};

    /// TWO_SWITCHES without node d.
    const SMALLER: &str = r#"
[defaults]
t = "48us"
bmax = "81.8MB/s"
link = "160MB/s"

[[switch]]
name = "s0"
ports = 8

[[host]]
name = "a"
port = "s0:0"

[[host]]
name = "b"
port = "s0:1"
"#;

    struct Replica {
        rt: Option<tokio::runtime::Runtime>,
        handle: Option<ManagerHandle>,
        url: String,
    }

    impl Replica {
        fn start(topology: &str, etcd: &LocalEtcd) -> Replica {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let topo = qos_core::topology::file::load("test.toml", topology).unwrap();
            let mut config = manager::Config::new(
                Arc::new(topo),
                "unused.db".into(),
                Secret::new(SECRET).unwrap(),
            );
            config.store = StoreConfig::Etcd(EtcdConfig::new(etcd.endpoints(), "/ha-test/"));
            config.lease = Duration::from_secs(30);
            config.election_ttl = Duration::from_secs(1);
            let handle = rt
                .block_on(async {
                    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                    manager::start(config, l).await
                })
                .unwrap();
            let url = format!("http://{}", handle.addr);
            Replica {
                rt: Some(rt),
                handle: Some(handle),
                url,
            }
        }

        fn leads(&self) -> bool {
            self.handle
                .as_ref()
                .is_some_and(|h| h.shared.role.is_leader())
        }

        fn flows(&self) -> usize {
            self.handle
                .as_ref()
                .unwrap()
                .term()
                .unwrap()
                .state
                .lock()
                .unwrap()
                .len()
        }

        /// Every task and socket of the replica gone at once, without resigning.
        fn crash(&mut self) {
            if let Some(h) = self.handle.take() {
                std::mem::forget(h);
            }
            if let Some(rt) = self.rt.take() {
                rt.shutdown_background();
            }
        }
    }

    fn until(limit: Duration, f: impl Fn() -> bool) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        f()
    }

    /// The index of the leader among `rs`, once exactly one leads.
    fn leader(rs: &[&Replica]) -> usize {
        assert!(
            until(Duration::from_secs(30), || rs
                .iter()
                .filter(|r| r.leads())
                .count()
                == 1),
            "no single leader"
        );
        rs.iter().position(|r| r.leads()).unwrap()
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    /// Asks through `client` until a decision comes (failover: `unavailable` is retried).
    fn request(client: &mut Client, port: u16) -> Decision {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            match client.request_bandwidth(&LocalFlow::new(port, "c", 0), 1_000_000) {
                Ok(d) => return d,
                Err(e) if e.code() == Some(ErrorCode::Unavailable) && Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("request failed: {e}"),
            }
        }
    }

    fn store_flows(etcd: &LocalEtcd) -> usize {
        rt().block_on(async {
            let s = EtcdStore::connect(&EtcdConfig::new(etcd.endpoints(), "/ha-test/"))
                .await
                .unwrap();
            s.read().await.unwrap().rows.len()
        })
    }

    #[test]
    #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
    fn a_crashed_leaders_flows_are_kept_and_its_agents_follow_the_new_leader() {
        let dir = tempfile::tempdir().unwrap();
        let etcd = LocalEtcd::start(&dir.path().join("etcd"), 1).unwrap();
        let mut rs = [
            Replica::start(TWO_SWITCHES, &etcd),
            Replica::start(TWO_SWITCHES, &etcd),
        ];
        let l = leader(&[&rs[0], &rs[1]]);
        let agents_rt = rt();
        let socket = dir.path().join("a.sock");
        let urls = format!("{},{}", rs[0].url, rs[1].url);
        let a = agents_rt
            .block_on(agent::start(agent::Config::new(
                "a",
                &urls,
                Secret::new(SECRET).unwrap(),
                socket.clone(),
            )))
            .unwrap();
        let table = a.idt_table();
        assert!(until(Duration::from_secs(10), || table.borrow().synced));
        let mut client = Client::connect(&socket).unwrap();
        for port in 1..=2 {
            assert!(matches!(request(&mut client, port), Decision::Granted(_)));
        }
        assert_eq!(rs[l].flows(), 2);

        rs[l].crash();
        let new = 1 - l;
        assert!(
            until(Duration::from_secs(30), || rs[new].leads()),
            "the other replica never took over"
        );
        // The new leader rebuilt the books from etcd, and the agent re-synced from it.
        assert_eq!(rs[new].flows(), 2);
        assert!(until(Duration::from_secs(15), || {
            let t = table.borrow();
            t.synced && t.snapshots >= 2 && t.flows.len() == 2
        }));
        // Admission goes on, through the same agent, without an operator.
        assert!(matches!(request(&mut client, 3), Decision::Granted(_)));
        assert_eq!(rs[new].flows(), 3);
        assert!(until(Duration::from_secs(10), || table
            .borrow()
            .flows
            .len()
            == 3));
        assert_eq!(store_flows(&etcd), 3);
        a.shutdown();
    }

    #[test]
    #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
    fn a_follower_never_admits_and_names_the_leader() {
        let dir = tempfile::tempdir().unwrap();
        let etcd = LocalEtcd::start(&dir.path().join("etcd"), 1).unwrap();
        let rs = [
            Replica::start(TWO_SWITCHES, &etcd),
            Replica::start(TWO_SWITCHES, &etcd),
        ];
        let l = leader(&[&rs[0], &rs[1]]);
        let f = &rs[1 - l];
        // Wait until the follower has observed who leads.
        assert!(until(Duration::from_secs(10), || {
            f.handle.as_ref().unwrap().shared.role.leader().as_deref() == Some(&rs[l].url)
        }));
        let body = r#"{"flow":{"src":{"node":"a","port":1},"dst":{"node":"c","port":0}},"class":{"type":"premium","bandwidth":1000},"owner":{"uid":0,"pid":1}}"#;
        let mut s = TcpStream::connect(f.url.trim_start_matches("http://")).unwrap();
        write!(
            s,
            "POST /v1/agents/a/flows HTTP/1.1\r\nhost: x\r\nclusterqos-protocol: 1\r\n\
             authorization: Bearer {SECRET}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
        assert!(
            reply.contains(&format!("{LEADER_HEADER}: {}", rs[l].url)),
            "{reply}"
        );
        assert!(reply.contains("\"code\":\"unavailable\""), "{reply}");
        assert!(f.handle.as_ref().unwrap().term().is_none());
        assert_eq!(store_flows(&etcd), 0);
        // A client given only the follower is sent on to the leader.
        let m = MasterClient::new(&f.url, "a", &Secret::new(SECRET).unwrap()).unwrap();
        let req: qos_runtime::protocol::FlowRequest = serde_json::from_str(body).unwrap();
        let d = rt().block_on(m.request(&req)).unwrap();
        assert!(matches!(d, Decision::Granted(_)));
        assert_eq!(rs[l].flows(), 1);
        assert!(f.handle.as_ref().unwrap().term().is_none());
    }

    #[test]
    #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
    fn across_a_failover_the_node_stays_with_its_agent_and_unfit_grants_refuse_the_term() {
        let dir = tempfile::tempdir().unwrap();
        let etcd = LocalEtcd::start(&dir.path().join("etcd"), 1).unwrap();
        let mut rs = [
            Replica::start(TWO_SWITCHES, &etcd),
            Replica::start(TWO_SWITCHES, &etcd),
        ];
        let l = leader(&[&rs[0], &rs[1]]);
        let urls = format!("{},{}", rs[0].url, rs[1].url);
        let secret = Secret::new(SECRET).unwrap();
        let c = rt();
        let holder = MasterClient::new(&urls, "a", &secret)
            .unwrap()
            .with_instance(1);
        c.block_on(holder.register()).unwrap();
        let req: qos_runtime::protocol::FlowRequest = serde_json::from_str(
            r#"{"flow":{"src":{"node":"a","port":1},"dst":{"node":"d","port":0}},"class":{"type":"premium","bandwidth":1000},"owner":{"uid":0,"pid":1}}"#,
        )
        .unwrap();
        assert!(matches!(
            c.block_on(holder.request(&req)).unwrap(),
            Decision::Granted(_)
        ));

        rs[l].crash();
        let new = 1 - l;
        assert!(until(Duration::from_secs(30), || rs[new].leads()));
        // Another agent process for node a is refused while the holder has its lease
        // to come back; the holder itself is taken back.
        let other = MasterClient::new(&urls, "a", &secret)
            .unwrap()
            .with_instance(2);
        let e = c.block_on(other.register()).unwrap_err();
        assert_eq!(e.code, ErrorCode::Conflict, "{}", e.message);
        c.block_on(holder.register()).unwrap();

        // A replica whose topology lacks node d is next in line: elected, it refuses
        // to lead from grants that do not fit, says why, and deletes nothing.
        let mut small = Replica::start(SMALLER, &etcd);
        std::thread::sleep(Duration::from_millis(500));
        rs[new].crash();
        let fatal = small.handle.as_mut().unwrap().fatal.take().unwrap();
        let e = c
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), fatal).await })
            .expect("the replica gave up in time")
            .unwrap();
        assert!(matches!(e, ManagerError::Unfit { .. }), "{e}");
        assert!(e.to_string().contains("no node 'd'"), "{e}");
        assert!(!small.leads());
        assert_eq!(store_flows(&etcd), 1);
    }
}

//! The Rust API against a real agent data plane on loopback.

use std::net::UdpSocket;
use std::time::Duration;

use qos_client::{Error, Port, PortOptions};
use qos_core::sched::SchedulerKind;
use qos_runtime::dataplane::engine::EngineConfig;
use qos_runtime::dataplane::service::{DataPlane, DataPlaneConfig};
use qos_runtime::shm::region::Layout;
use qos_runtime::transport::auth::{DataKey, DEFAULT_MAX_SKEW_SECS};
use qos_runtime::transport::link::Faults;

/// A data plane for node `me` of `nodes` with its port socket in `dir`.
fn start(
    dir: &std::path::Path,
    me: &str,
    nodes: &[(String, std::net::SocketAddr)],
    udp: UdpSocket,
) -> (
    qos_runtime::dataplane::service::DataPlaneHandle,
    std::path::PathBuf,
    std::thread::JoinHandle<()>,
) {
    let socket = dir.join(format!("{me}.sock"));
    let dp = DataPlane::bind_on(
        DataPlaneConfig {
            node: me.into(),
            nodes: nodes.to_vec(),
            socket: socket.clone(),
            socket_mode: 0o600,
            allowed_uids: vec![],
            engine: EngineConfig::default(),
            faults: Faults::default(),
            scheduler: SchedulerKind::RateControl,
            layout: Layout {
                buffer_bytes: 4 << 20,
                ..Layout::default()
            },
            key: DataKey::from_bytes(b"the client tests' cluster key"),
            max_clock_skew_secs: DEFAULT_MAX_SKEW_SECS,
            protection: Default::default(),
            limits: qos_runtime::dataplane::service::PortLimits::default(),
        },
        Some(udp),
    )
    .unwrap();
    let h = dp.handle();
    (h, socket, std::thread::spawn(move || dp.run().unwrap()))
}

/// Binds `addr` again for a restarted agent, retrying while another process holds it.
fn rebind(addr: std::net::SocketAddr) -> UdpSocket {
    for _ in 0..200 {
        match UdpSocket::bind(addr) {
            Ok(s) => return s,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("binding {addr}: {e}"),
        }
    }
    panic!("{addr} stayed in use")
}

#[test]
fn a_sender_hears_of_messages_a_restarted_receiving_agent_lost_and_then_sends_again() {
    let dir = tempfile::tempdir().unwrap();
    // Ports picked by binding port 0 and handed over bound (no window for another
    // process to take them).
    let (u0, u1) = (
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    );
    let nodes = vec![
        ("n0".to_string(), u0.local_addr().unwrap()),
        ("n1".to_string(), u1.local_addr().unwrap()),
    ];
    let a = start(dir.path(), "n0", &nodes, u0);
    let b = start(dir.path(), "n1", &nodes, u1);
    let mut tx = Port::open(PortOptions::new(&a.1).port(1).max_message(1024)).unwrap();
    // 1 MiB slots: the receiving port posts two receive buffers.
    let big = PortOptions::new(&b.1).port(2).max_message(1 << 20);
    let mut rx = Port::open(big.clone()).unwrap();
    tx.send("n1", 2, 0, b"one").unwrap();
    assert_eq!(rx.recv(Duration::from_secs(5)).unwrap().data, b"one");
    tx.flush(Duration::from_secs(5)).unwrap();
    // The receiving application stops reading: two more messages fill its buffers, its
    // agent holds three; then the agent restarts (losing them) and the application
    // opens its port again.
    for _ in 0..5 {
        tx.send("n1", 2, 0, b"held").unwrap();
    }
    let _ = tx.flush(Duration::from_millis(300));
    assert_eq!(tx.in_flight(), 3, "three held by the receiving agent");
    b.0.stop();
    b.2.join().unwrap();
    drop(rx);
    let b = start(dir.path(), "n1", &nodes, rebind(nodes[1].1));
    let mut rx = Port::open(big).unwrap();
    // The sender is told of each, within bounded time, instead of waiting forever.
    let mut lost = 0;
    loop {
        match tx.flush(Duration::from_secs(10)) {
            Ok(()) => break,
            Err(Error::PeerRestarted { node }) => {
                assert_eq!(node, "n1");
                lost += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(lost, 3);
    tx.send("n1", 2, 0, b"again").unwrap();
    assert_eq!(rx.recv(Duration::from_secs(5)).unwrap().data, b"again");
    tx.flush(Duration::from_secs(5)).unwrap();
    for (h, _, t) in [a, b] {
        h.stop();
        t.join().unwrap();
    }
}

#[test]
fn ports_exchange_many_messages_in_order_and_refuse_oversized_ones() {
    let dir = tempfile::tempdir().unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = udp.local_addr().unwrap();
    let socket = dir.path().join("dp.sock");
    let dp = DataPlane::bind_on(
        DataPlaneConfig {
            node: "n0".into(),
            nodes: vec![("n0".into(), addr)],
            socket: socket.clone(),
            socket_mode: 0o600,
            allowed_uids: vec![],
            engine: EngineConfig::default(),
            faults: Faults::default(),
            scheduler: SchedulerKind::RateControl,
            layout: Layout {
                buffer_bytes: 4 << 20,
                ..Layout::default()
            },
            key: DataKey::from_bytes(b"the client tests' cluster key"),
            max_clock_skew_secs: DEFAULT_MAX_SKEW_SECS,
            protection: Default::default(),
            limits: qos_runtime::dataplane::service::PortLimits::default(),
        },
        Some(udp),
    )
    .unwrap();
    let h = dp.handle();
    let t = std::thread::spawn(move || dp.run().unwrap());
    let mut a = Port::open(PortOptions::new(&socket).port(1)).unwrap();
    let mut b = Port::open(PortOptions::new(&socket).port(2)).unwrap();
    for i in 0..200u32 {
        let data: Vec<u8> = (0..(i * 300) % 60_000).map(|j| (i + j) as u8).collect();
        a.send("n0", 2, 0, &data).unwrap();
        let m = b.recv(Duration::from_secs(5)).unwrap();
        assert_eq!(m.data, data);
        assert_eq!((m.src_node.as_str(), m.src_port), ("n0", 1));
    }
    a.flush(Duration::from_secs(5)).unwrap();
    assert!(matches!(
        a.send("n0", 2, 0, &vec![0u8; 70_000]),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        a.send("nowhere", 2, 0, b"x"),
        Err(Error::UnknownNode(_))
    ));
    h.stop();
    t.join().unwrap();
}

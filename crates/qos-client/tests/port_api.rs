//! The Rust API against a real agent data plane on loopback.

use std::net::UdpSocket;
use std::time::Duration;

use qos_client::{Error, Port, PortOptions};
use qos_core::sched::SchedulerKind;
use qos_runtime::dataplane::engine::EngineConfig;
use qos_runtime::dataplane::service::{DataPlane, DataPlaneConfig};
use qos_runtime::shm::region::Layout;
use qos_runtime::transport::link::Faults;

#[test]
fn ports_exchange_many_messages_in_order_and_refuse_oversized_ones() {
    let dir = tempfile::tempdir().unwrap();
    let addr = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let socket = dir.path().join("dp.sock");
    let dp = DataPlane::bind(DataPlaneConfig {
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
    })
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

//! `cq_recv` with a buffer smaller than the message: the message is
//! kept and its length returned, as recv(2) with MSG_PEEK|MSG_TRUNC does; a second call
//! with a buffer that large takes it whole. Called through the C ABI from Rust (no C
//! compiler needed), against a real agent data plane on loopback.

use std::ffi::{c_void, CString};
use std::net::UdpSocket;

use qos_client::ffi::{cq_close, cq_last_error, cq_open, cq_recv, cq_send, CqRecvInfo};
use qos_core::sched::SchedulerKind;
use qos_runtime::dataplane::engine::EngineConfig;
use qos_runtime::dataplane::service::{DataPlane, DataPlaneConfig};
use qos_runtime::shm::region::Layout;
use qos_runtime::transport::auth::{DataKey, DEFAULT_MAX_SKEW_SECS};
use qos_runtime::transport::link::Faults;

#[test]
fn a_message_longer_than_the_buffer_is_kept_and_its_length_returned() {
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
    let path = CString::new(socket.to_str().unwrap()).unwrap();
    let node = CString::new("n0").unwrap();
    let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    // SAFETY: valid strings and buffers for every call; ports closed once, at the end.
    unsafe {
        let a = cq_open(path.as_ptr(), 1);
        let b = cq_open(path.as_ptr(), 2);
        assert!(!a.is_null() && !b.is_null());
        let sent = cq_send(a, node.as_ptr(), 2, 0, msg.as_ptr() as *const c_void, 5000);
        assert_eq!(sent, 0);
        let mut info: CqRecvInfo = std::mem::zeroed();
        let mut small = [0u8; 100];
        let r = cq_recv(b, small.as_mut_ptr() as *mut c_void, 100, 5000, &mut info);
        assert_eq!(r, 5000, "the length needed, not -1");
        assert_eq!(small, [0u8; 100], "nothing copied");
        assert_eq!(info.src_port, 1);
        let err = std::ffi::CStr::from_ptr(cq_last_error()).to_string_lossy();
        assert!(err.contains("5000") && err.contains("kept"), "{err}");
        // Asking with no buffer gives the length again: the message is still there.
        assert_eq!(
            cq_recv(b, std::ptr::null_mut(), 0, 0, std::ptr::null_mut()),
            5000
        );
        let mut whole = vec![0u8; 5000];
        let r = cq_recv(b, whole.as_mut_ptr() as *mut c_void, 5000, 0, &mut info);
        assert_eq!(r, 5000);
        assert_eq!(whole, msg);
        // Taken now: nothing is left.
        let r = cq_recv(b, whole.as_mut_ptr() as *mut c_void, 5000, 100, &mut info);
        assert_eq!(r, -2);
        // A NULL buffer with a capacity is an error, not a crash.
        assert_eq!(
            cq_recv(b, std::ptr::null_mut(), 10, 0, std::ptr::null_mut()),
            -1
        );
        cq_close(a);
        cq_close(b);
    }
    h.stop();
    t.join().unwrap();
}

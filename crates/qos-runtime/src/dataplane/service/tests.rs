//! Port tests: two data planes on loopback, applications on shared-memory ports.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

use qos_core::sched::SchedulerKind;

use super::{DataPlane, DataPlaneConfig, DataPlaneHandle};
use crate::dataplane::engine::EngineConfig;
use crate::shm::client::{PortClient, PortError};
use crate::shm::region::{Layout, RecvDesc, SendDesc, CQ_ERROR, CQ_RECEIVED, CQ_SENT};
use crate::transport::auth::{DataKey, DEFAULT_MAX_SKEW_SECS};
use crate::transport::link::Faults;

/// The key every test agent shares.
fn key() -> DataKey {
    DataKey::from_bytes(b"the data plane tests' cluster key")
}

/// A socket bound on a free loopback port, kept bound until an agent takes it (port 0
/// then hand over: no window in which another process can take the port).
fn bound_udp() -> std::net::UdpSocket {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap()
}

/// Binds `addr` again for a restarted agent. The old agent's socket is closed, so the
/// port is free unless another process took it meanwhile; retried a while if so.
fn rebind(addr: SocketAddr) -> std::net::UdpSocket {
    for _ in 0..200 {
        match std::net::UdpSocket::bind(addr) {
            Ok(s) => return s,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("binding {addr}: {e}"),
        }
    }
    panic!("{addr} stayed in use")
}

type Agent = (DataPlaneHandle, PathBuf, std::thread::JoinHandle<()>);
type Nodes = Vec<(String, SocketAddr)>;

fn start(
    dir: &std::path::Path,
    me: &str,
    nodes: &[(String, SocketAddr)],
    udp: std::net::UdpSocket,
) -> Agent {
    start_with(dir, me, nodes, udp, super::PortLimits::default())
}

fn start_with(
    dir: &std::path::Path,
    me: &str,
    nodes: &[(String, SocketAddr)],
    udp: std::net::UdpSocket,
    limits: super::PortLimits,
) -> Agent {
    let socket = dir.join(format!("{me}.sock"));
    let cfg = DataPlaneConfig {
        node: me.into(),
        nodes: nodes.to_vec(),
        socket: socket.clone(),
        socket_mode: 0o666,
        allowed_uids: vec![],
        engine: EngineConfig {
            payload: 16_000,
            ..EngineConfig::default()
        },
        faults: Faults::default(),
        scheduler: SchedulerKind::RateControl,
        layout: Layout {
            buffer_bytes: 1 << 20,
            ..Layout::default()
        },
        key: key(),
        max_clock_skew_secs: DEFAULT_MAX_SKEW_SECS,
        protection: Default::default(),
        limits,
    };
    let dp = DataPlane::bind_on(cfg, Some(udp)).unwrap();
    let h = dp.handle();
    let t = std::thread::spawn(move || dp.run().unwrap());
    (h, socket, t)
}

fn two_nodes(dir: &std::path::Path) -> (Vec<Agent>, Nodes) {
    let (sa, sb) = (bound_udp(), bound_udp());
    let nodes = vec![
        ("a".to_string(), sa.local_addr().unwrap()),
        ("b".to_string(), sb.local_addr().unwrap()),
    ];
    let v = vec![start(dir, "a", &nodes, sa), start(dir, "b", &nodes, sb)];
    (v, nodes)
}

/// Every kind is selectable by name, with the short names the agent always took; a bad
/// name says which and lists the good ones.
#[test]
fn every_scheduler_is_selectable_by_name_and_a_bad_name_says_which() {
    use super::{scheduler_kind, SCHEDULER_NAMES};
    for kind in SchedulerKind::ALL {
        assert_eq!(scheduler_kind(kind.name()), Ok(kind), "{kind}");
    }
    for (name, kind) in [
        ("rate", SchedulerKind::RateControl),
        ("on", SchedulerKind::RateControl),
        ("round-robin", SchedulerKind::MessageRoundRobin),
        ("off", SchedulerKind::Gm),
    ] {
        assert_eq!(scheduler_kind(name), Ok(kind));
    }
    assert!(SCHEDULER_NAMES.len() > SchedulerKind::ALL.len());
    let e = scheduler_kind("wfq").unwrap_err().to_string();
    assert!(e.starts_with("unknown scheduler 'wfq'"), "{e}");
    for listed in [
        "rate-control",
        "virtual-clock",
        "round-robin",
        "interleaved-round-robin",
        "gm",
    ] {
        assert!(e.contains(listed), "{e}");
    }
    assert!(scheduler_kind("Virtual-Clock").is_err(), "names are exact");
}

#[test]
fn messages_cross_between_ports_through_shared_queues() {
    let dir = tempfile::tempdir().unwrap();
    let (agents, _) = two_nodes(dir.path());
    let tx = PortClient::open(&agents[0].1, Some(1)).unwrap();
    let rx = PortClient::open(&agents[1].1, Some(2)).unwrap();
    assert_eq!(tx.nodes, vec!["a", "b"]);
    let b = tx.node_index("b").unwrap();
    for i in 0..8u64 {
        assert!(rx
            .post_recv(RecvDesc {
                offset: i * 65_536,
                capacity: 65_536,
                cookie: 100 + i,
                _pad: 0
            })
            .unwrap());
    }
    for i in 0..8u64 {
        let msg: Vec<u8> = (0..40_000u32).map(|j| (j as u64 * 3 + i) as u8).collect();
        assert!(tx.region().write(i * 65_536, &msg));
        let d = SendDesc {
            offset: i * 65_536,
            len: 40_000,
            dst_node: b,
            cookie: i,
            dst_port: 2,
            priority: 0,
            _pad: [0; 5],
        };
        assert!(tx.post_send(d).unwrap());
    }
    let mut got = 0;
    while got < 8 {
        let c = rx
            .wait(Duration::from_secs(5))
            .unwrap()
            .expect("message arrives");
        assert_eq!(c.kind, CQ_RECEIVED);
        assert_eq!(
            (c.cookie, c.len, c.src_node, c.src_port),
            (100 + got, 40_000, 0, 1)
        );
        let mut buf = vec![0u8; 40_000];
        assert!(rx.region().read(got * 65_536, &mut buf));
        assert!(
            buf.iter()
                .enumerate()
                .all(|(j, &x)| x == (j as u64 * 3 + got) as u8),
            "message {got} intact"
        );
        got += 1;
    }
    let mut sent = 0;
    while sent < 8 {
        let c = tx
            .wait(Duration::from_secs(5))
            .unwrap()
            .expect("send completes");
        assert_eq!(c.kind, CQ_SENT);
        sent += 1;
    }
    for a in agents {
        a.0.stop();
        a.2.join().unwrap();
    }
}

#[test]
fn bad_descriptor_gets_an_error_completion_and_changes_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (agents, _) = two_nodes(dir.path());
    let tx = PortClient::open(&agents[0].1, None).unwrap();
    let d = SendDesc {
        offset: u64::MAX - 4,
        len: 100,
        dst_node: 1,
        cookie: 7,
        dst_port: 2,
        priority: 0,
        _pad: [0; 5],
    };
    tx.post_send(d).unwrap();
    let c = tx.wait(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!((c.kind, c.cookie), (CQ_ERROR, 7));
    let d = SendDesc {
        offset: 0,
        len: 100,
        dst_node: 99,
        cookie: 8,
        dst_port: 2,
        priority: 0,
        _pad: [0; 5],
    };
    tx.post_send(d).unwrap();
    let c = tx.wait(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!((c.kind, c.cookie), (CQ_ERROR, 8));
    for a in agents {
        a.0.stop();
        a.2.join().unwrap();
    }
}

#[test]
fn same_port_twice_is_refused_and_freed_when_its_owner_closes() {
    let dir = tempfile::tempdir().unwrap();
    let (agents, _) = two_nodes(dir.path());
    let p = PortClient::open(&agents[0].1, Some(5)).unwrap();
    let e = PortClient::open(&agents[0].1, Some(5)).err().unwrap();
    assert!(e.to_string().contains("port 5 is already open"), "{e}");
    drop(p);
    let mut reopened = None;
    for _ in 0..100 {
        if let Ok(p) = PortClient::open(&agents[0].1, Some(5)) {
            reopened = Some(p);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(reopened.is_some(), "port 5 freed after its owner left");
    for a in agents {
        a.0.stop();
        a.2.join().unwrap();
    }
}

#[test]
fn ports_per_process_and_per_uid_are_limited_with_a_clear_error() {
    // Regression: one process opened 6,661 ports and took all but one of the agent's
    // 20,000 descriptors; other users' opens got an empty reply.
    let dir = tempfile::tempdir().unwrap();
    // (per uid, per process, what the third open is told)
    for (per_uid, per_process, expected) in [
        (10, 2, "--max-ports-per-process"),
        (2, 10, "--max-ports-per-uid"),
    ] {
        let udp = bound_udp();
        let nodes = vec![("a".to_string(), udp.local_addr().unwrap())];
        let limits = super::PortLimits {
            per_uid,
            per_process,
            ..super::PortLimits::default()
        };
        let sub = dir.path().join(expected);
        std::fs::create_dir_all(&sub).unwrap();
        let agent = start_with(&sub, "a", &nodes, udp, limits);
        let open = |p| PortClient::open(&agent.1, Some(p));
        let (p1, p2) = (open(1).unwrap(), open(2).unwrap());
        let e = open(3).err().unwrap().to_string();
        assert!(
            e.contains("already holds 2 ports") && e.contains(expected),
            "{e}"
        );
        drop(p1);
        let mut again = None;
        for _ in 0..100 {
            if let Ok(p) = open(3) {
                again = Some(p);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(again.is_some(), "a port closed frees its place");
        drop((p2, again));
        agent.0.stop();
        agent.2.join().unwrap();
    }
}

#[test]
fn stopping_the_agent_gives_its_clients_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let (agents, _) = two_nodes(dir.path());
    let p = PortClient::open(&agents[0].1, Some(3)).unwrap();
    let mut agents = agents.into_iter();
    let a = agents.next().unwrap();
    a.0.stop();
    a.2.join().unwrap();
    let e = p.wait(Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, PortError::AgentGone), "{e}");
    assert!(e.to_string().contains("reopen"));
    for a in agents {
        a.0.stop();
        a.2.join().unwrap();
    }
}

/// Tests that switch to another uid: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    /// A temporary directory uid 65534 can reach wherever the checkout and `$TMPDIR` are:
    /// under the first base whose every ancestor lets any user through, opened (our own
    /// directory only) for traversal.
    fn shared_tempdir() -> Option<tempfile::TempDir> {
        let traversable = |d: &std::path::Path| {
            d.canonicalize().is_ok_and(|d| {
                d.ancestors()
                    .all(|a| std::fs::metadata(a).is_ok_and(|m| m.mode() & 0o001 != 0))
            })
        };
        let base = [
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/dev/shm"),
        ]
        .into_iter()
        .find(|b| traversable(b))?;
        let dir = tempfile::tempdir_in(base).ok()?;
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .ok()?;
        Some(dir)
    }

    #[test]
    #[ignore = "needs root: switches to another uid"]
    fn a_process_with_an_unregistered_uid_cannot_open_a_port() {
        // SAFETY: getuid never fails.
        assert_eq!(
            unsafe { libc::getuid() },
            0,
            "run as root: switches to uid 65534"
        );
        let dir = shared_tempdir()
            .expect("a temporary directory every user can traverse ($TMPDIR, /tmp or /dev/shm)");
        let (agents, _) = two_nodes(dir.path());
        let path = std::ffi::CString::new(agents[0].1.to_str().unwrap()).unwrap();
        // SAFETY: the child only makes system calls on stack buffers, then _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: child process; plain syscalls.
            unsafe {
                if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    libc::_exit(10);
                }
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
                let mut addr: libc::sockaddr_un = std::mem::zeroed();
                addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
                for (i, b) in path.as_bytes().iter().enumerate() {
                    addr.sun_path[i] = *b as libc::c_char;
                }
                if libc::connect(
                    fd,
                    &addr as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_un>() as u32,
                ) != 0
                {
                    libc::_exit(11);
                }
                let req = b"{\"version\":1,\"op\":\"open\",\"port\":9}";
                libc::send(fd, req.as_ptr() as *const libc::c_void, req.len(), 0);
                let mut buf = [0u8; 512];
                let n = libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0);
                let reply = &buf[..n.max(0) as usize];
                let refused = reply.windows(14).any(|w| w == b"not registered");
                libc::_exit(if refused { 0 } else { 12 });
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status));
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "child was refused with a clear reason"
        );
        for a in agents {
            a.0.stop();
            a.2.join().unwrap();
        }
    }
}

#[test]
fn a_reopened_port_sends_again_on_the_same_flow() {
    let dir = tempfile::tempdir().unwrap();
    let (agents, _) = two_nodes(dir.path());
    let rx = PortClient::open(&agents[1].1, Some(2)).unwrap();
    for round in 0..3u64 {
        let tx = loop {
            match PortClient::open(&agents[0].1, Some(1)) {
                Ok(p) => break p,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        rx.post_recv(RecvDesc {
            offset: 0,
            capacity: 1000,
            cookie: round,
            _pad: 0,
        })
        .unwrap();
        tx.region().write(0, b"again");
        tx.post_send(SendDesc {
            offset: 0,
            len: 5,
            dst_node: 1,
            cookie: round,
            dst_port: 2,
            priority: 0,
            _pad: [0; 5],
        })
        .unwrap();
        let c = rx
            .wait(Duration::from_secs(5))
            .unwrap()
            .expect("message after reopening");
        assert_eq!((c.kind, c.cookie, c.len), (CQ_RECEIVED, round, 5));
        let c = tx
            .wait(Duration::from_secs(5))
            .unwrap()
            .expect("send completes");
        assert_eq!(c.kind, CQ_SENT);
    }
    for a in agents {
        a.0.stop();
        a.2.join().unwrap();
    }
}

/// Sends `text` from `tx` to port 2 of node 1 with `cookie`.
fn send_text(tx: &PortClient, cookie: u64, text: &[u8]) {
    let offset = cookie * 1024;
    assert!(tx.region().write(offset, text));
    assert!(tx
        .post_send(SendDesc {
            offset,
            len: text.len() as u32,
            dst_node: 1,
            cookie,
            dst_port: 2,
            priority: 0,
            _pad: [0; 5],
        })
        .unwrap());
}

fn post_buffers(rx: &PortClient, cookies: std::ops::Range<u64>) {
    for c in cookies {
        assert!(rx
            .post_recv(RecvDesc {
                offset: c * 1024,
                capacity: 1024,
                cookie: c,
                _pad: 0
            })
            .unwrap());
    }
}

/// The next completion on `p`, which must come within 5 s.
fn next(p: &PortClient) -> crate::shm::region::CompletionDesc {
    p.wait(Duration::from_secs(5))
        .unwrap()
        .expect("a completion within 5 s")
}

fn stop(a: Agent) {
    a.0.stop();
    a.2.join().unwrap();
}

#[test]
fn a_restarted_sending_agent_delivers_again_on_the_same_flow() {
    let dir = tempfile::tempdir().unwrap();
    let (agents, nodes) = two_nodes(dir.path());
    let mut agents = agents.into_iter();
    let (a, b) = (agents.next().unwrap(), agents.next().unwrap());
    let rx = PortClient::open(&b.1, Some(2)).unwrap();
    post_buffers(&rx, 0..8);
    let tx = PortClient::open(&a.1, Some(1)).unwrap();
    for c in 0..3 {
        send_text(&tx, c, b"before");
        assert_eq!(next(&rx).kind, CQ_RECEIVED);
    }
    // The sending agent goes (all its state with it) and comes back on the same address.
    stop(a);
    loop {
        match tx.wait(Duration::from_secs(5)) {
            Ok(Some(c)) => assert_eq!(c.kind, CQ_SENT),
            Err(PortError::AgentGone) => break,
            r => panic!("{r:?}"),
        }
    }
    drop(tx);
    let a = start(dir.path(), "a", &nodes, rebind(nodes[0].1));
    let tx = PortClient::open(&a.1, Some(1)).unwrap();
    for c in 0..3 {
        send_text(&tx, c, b"after");
        let r = next(&rx);
        assert_eq!((r.kind, r.len, r.src_port), (CQ_RECEIVED, 5, 1));
        let mut buf = [0u8; 5];
        rx.region().read(r.cookie * 1024, &mut buf);
        assert_eq!(&buf, b"after");
        assert_eq!(next(&tx).kind, CQ_SENT);
    }
    stop(a);
    stop(b);
}

#[test]
fn a_restarted_receiving_agent_gets_its_flows_back_and_the_sender_hears_what_was_lost() {
    use crate::shm::region::ERR_PEER_RESTARTED;
    let dir = tempfile::tempdir().unwrap();
    let (agents, nodes) = two_nodes(dir.path());
    let mut agents = agents.into_iter();
    let (a, b) = (agents.next().unwrap(), agents.next().unwrap());
    let rx = PortClient::open(&b.1, Some(2)).unwrap();
    post_buffers(&rx, 0..2);
    let tx = PortClient::open(&a.1, Some(1)).unwrap();
    // Six messages: the receiving port takes two; the agent holds the other four for it.
    for c in 0..6 {
        send_text(&tx, c, b"first");
    }
    for _ in 0..2 {
        assert_eq!(next(&rx).kind, CQ_RECEIVED);
        assert_eq!(next(&tx).kind, CQ_SENT);
    }
    assert!(tx.wait(Duration::from_millis(200)).unwrap().is_none());
    // The receiving agent goes and comes back; the application opens its port again.
    stop(b);
    drop(rx);
    let b = start(dir.path(), "b", &nodes, rebind(nodes[1].1));
    let rx = PortClient::open(&b.1, Some(2)).unwrap();
    post_buffers(&rx, 0..8);
    // The sending agent, probing for the four, learns the receiver lost them and says so.
    let mut failed = vec![];
    for _ in 0..4 {
        let c = next(&tx);
        assert_eq!(
            (c.kind, c.len, c.src_node),
            (CQ_ERROR, ERR_PEER_RESTARTED, 1)
        );
        failed.push(c.cookie);
    }
    failed.sort_unstable();
    assert_eq!(
        failed,
        vec![2, 3, 4, 5],
        "what the old agent held is reported lost"
    );
    // The flow delivers again.
    for c in 6..9 {
        send_text(&tx, c, b"second");
    }
    let mut sent: Vec<u64> = (0..3)
        .map(|_| next(&tx))
        .map(|c| {
            assert_eq!(c.kind, CQ_SENT);
            c.cookie
        })
        .collect();
    sent.sort_unstable();
    assert_eq!(sent, vec![6, 7, 8]);
    for _ in 0..3 {
        let r = next(&rx);
        assert_eq!((r.kind, r.len), (CQ_RECEIVED, 6));
    }
    stop(a);
    stop(b);
}

/// A process that connects to the port socket and sends nothing holds no one up: the
/// agent's loop goes on moving messages (it used to wait up to 1 s for each such
/// connection's request), drops the silent connection after 1 s, and refuses more than
/// a few waiting set-ups per uid with a reply that says why.
#[test]
fn silent_set_up_connections_do_not_stall_the_data_plane() {
    use crate::shm::fdpass;
    let dir = tempfile::tempdir().unwrap();
    let (agents, _) = two_nodes(dir.path());
    let tx = PortClient::open(&agents[0].1, Some(1)).unwrap();
    let rx = PortClient::open(&agents[1].1, Some(2)).unwrap();
    post_buffers(&rx, 0..16);
    let silent: Vec<_> = (0..6)
        .map(|_| fdpass::seqpacket(&agents[0].1, false).unwrap())
        .collect();
    // Let the loop accept them (it looks every 10 ms).
    std::thread::sleep(Duration::from_millis(50));
    let t = std::time::Instant::now();
    send_text(&tx, 1, b"through");
    let c = next(&rx);
    assert_eq!((c.kind, c.cookie), (CQ_RECEIVED, 0));
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "a message took {:?} behind 6 silent connections (1 s each when the loop waited)",
        t.elapsed()
    );
    // A port still opens while they wait.
    let other = PortClient::open(&agents[0].1, Some(3)).unwrap();
    drop(other);
    // Each is closed by the agent after about a second.
    for s in &silent {
        let ready = fdpass::wait_readable(&[s.as_fd()], Some(Duration::from_secs(5)));
        assert!(ready[0], "the agent closes a silent connection");
        let mut b = [0u8; 64];
        assert_eq!(
            fdpass::recv_with_fds(s, &mut b).map(|r| r.0).unwrap_or(0),
            0
        );
    }
    // One uid may keep only a few set-ups waiting: the next is told why.
    let waiting: Vec<_> = (0..8)
        .map(|_| fdpass::seqpacket(&agents[0].1, false).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let extra = fdpass::seqpacket(&agents[0].1, false).unwrap();
    assert!(fdpass::wait_readable(&[extra.as_fd()], Some(Duration::from_secs(5)))[0]);
    let mut b = [0u8; 1024];
    let (n, _) = fdpass::recv_with_fds(&extra, &mut b).unwrap();
    let reply = String::from_utf8_lossy(&b[..n]);
    assert!(
        reply.contains("too many port set-ups in progress"),
        "{reply}"
    );
    drop((waiting, tx, rx));
    for a in agents {
        stop(a);
    }
}

//! The C example is compiled with the system `cc` against the cdylib and run against a
//! real agent data plane. Ignored by default; `scripts/test` runs it where `cc` exists.

use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::Command;

use qos_core::sched::SchedulerKind;
use qos_runtime::dataplane::engine::EngineConfig;
use qos_runtime::dataplane::service::{DataPlane, DataPlaneConfig};
use qos_runtime::shm::region::Layout;
use qos_runtime::transport::auth::{DataKey, DEFAULT_MAX_SKEW_SECS};
use qos_runtime::transport::link::Faults;

fn start_agent(
    dir: &std::path::Path,
) -> (
    qos_runtime::dataplane::service::DataPlaneHandle,
    PathBuf,
    std::thread::JoinHandle<()>,
) {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = udp.local_addr().unwrap();
    let socket = dir.join("dp.sock");
    let cfg = DataPlaneConfig {
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
    };
    let dp = DataPlane::bind_on(cfg, Some(udp)).unwrap();
    let h = dp.handle();
    (h, socket, std::thread::spawn(move || dp.run().unwrap()))
}

/// Needs the system C compiler: run by `scripts/test` where `cc` exists (`-- --ignored cc::`).
mod cc {
    use super::*;

    #[test]
    #[ignore = "needs a C compiler: builds examples/c/pingpong.c with cc"]
    fn c_example_compiles_links_and_round_trips_messages() {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        // target/<profile>/deps/<test> → target/<profile>
        let exe = std::env::current_exe().unwrap();
        let libdir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        {
            // `cargo test` builds the rlib only: build the cdylib every time (cargo makes
            // this a no-op when it is fresh), so a stale library is never linked.
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "-p", "qos-client", "--lib", "--manifest-path"])
                .arg(manifest.join("Cargo.toml"));
            if libdir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            if let Some(target) = libdir.parent() {
                cmd.env("CARGO_TARGET_DIR", target);
            }
            // Not the variables `cargo test` gives this test: ring's build script reruns
            // when CARGO_MANIFEST_DIR changes, so with them the inner build rebuilt ring
            // and everything above it, and the suite's next `cargo test` rebuilt them
            // back (~1.5 min of a CI run).
            for (k, _) in std::env::vars_os() {
                let k = k.to_string_lossy();
                if [
                    "CARGO_MANIFEST_",
                    "CARGO_PKG_",
                    "CARGO_CRATE_",
                    "CARGO_BIN_",
                ]
                .iter()
                .any(|p| k.starts_with(p))
                    || k == "CARGO_TARGET_TMPDIR"
                    || k == "CARGO_PRIMARY_PACKAGE"
                {
                    cmd.env_remove(k.as_ref());
                }
            }
            let st = cmd.status().unwrap();
            assert!(st.success(), "building the cdylib failed");
        }
        if !libdir.join("libqos_client.so").exists() {
            panic!("cdylib not found in {}", libdir.display());
        }
        if Command::new("cc").arg("--version").output().is_err() {
            panic!("no system C compiler `cc`");
        }
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("pingpong");
        let out = Command::new("cc")
            .args(["-std=c99", "-Wall", "-Werror", "-o"])
            .arg(&bin)
            .arg(manifest.join("examples/c/pingpong.c"))
            .arg("-I")
            .arg(manifest.join("include"))
            .arg("-L")
            .arg(&libdir)
            .arg(format!("-Wl,-rpath,{}", libdir.display()))
            .arg("-lqos_client")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (h, socket, t) = start_agent(dir.path());
        let run = Command::new(&bin)
            .arg(&socket)
            .arg("n0")
            .arg("20")
            .output()
            .unwrap();
        h.stop();
        t.join().unwrap();
        assert!(
            run.status.success(),
            "pingpong failed: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(String::from_utf8_lossy(&run.stdout)
            .contains("20 round trips ok between ports 21 and 22"));
    }
}

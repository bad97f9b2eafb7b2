//! Running an unmodified program under a flow (`clusterqos exec`): the flow
//! is asked of the node's agent (premium or best-effort), the program run, and the flow
//! given back when it exits — also when it cannot be started, so nothing granted is
//! left behind. SIGINT, SIGTERM and SIGHUP sent to this process are passed on to the
//! program. With the agent's kernel backend the program's packets are shaped to the
//! grant (docs/kernel-backend.md).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use super::{Client, ClientError, LocalFlow};
use crate::protocol::{Decision, IdtEntry, RejectionInfo};

/// What to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Premium bandwidth, bytes per second.
    Premium(u64),
    /// A best-effort share with this weight (max-min policy).
    BestEffort(u32),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The request was refused; the program was not run.
    Rejected(RejectionInfo),
    /// The program's exit status (128 + N when signal N ended it).
    Exited(u8),
}

/// Why the program could not be run under the flow.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The agent could not be reached.
    #[error("agent socket {}", .socket.display())]
    Connect {
        socket: PathBuf,
        #[source]
        source: ClientError,
    },
    /// The request failed (not a refusal: that is [`Ended::Rejected`]).
    #[error(transparent)]
    Request(#[from] ClientError),
    /// The agent could not be reached to give the flow back.
    #[error("agent socket {} (releasing the flow)", .socket.display())]
    ReleaseConnect {
        socket: PathBuf,
        #[source]
        source: ClientError,
    },
    /// The flow could not be given back.
    #[error("releasing the flow")]
    Release(#[source] ClientError),
    /// The program could not be started (the flow was given back).
    #[error("cannot run '{program}': {error}")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    /// Waiting for the program failed (the flow was given back).
    #[error("waiting for '{program}'")]
    Wait {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// The running program, for the signal handler (0: none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; it only signals the program we started.
        unsafe { libc::kill(pid, sig) };
    }
}

fn forward_signals() {
    let handler = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only reads an atomic and calls kill.
        unsafe { libc::signal(sig, handler) };
    }
}

fn release(socket: &Path, flow: &LocalFlow) -> Result<(), ExecError> {
    let mut c = Client::connect(socket).map_err(|source| ExecError::ReleaseConnect {
        socket: socket.to_path_buf(),
        source,
    })?;
    c.release(flow).map_err(ExecError::Release)?;
    Ok(())
}

/// Asks the agent at `socket` for `flow` (belonging to this process, which lives as
/// long as the program), calls `granted` with the grant, runs `command` (program and
/// arguments) with the signals forwarded, and releases the flow when it exits.
pub fn run(
    socket: &Path,
    flow: &LocalFlow,
    want: Want,
    command: &[String],
    granted: impl FnOnce(&IdtEntry),
) -> Result<Ended, ExecError> {
    let Some((program, args)) = command.split_first() else {
        return Err(ExecError::Spawn {
            program: String::new(),
            error: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no program given"),
        });
    };
    let mut c = Client::connect(socket).map_err(|source| ExecError::Connect {
        socket: socket.to_path_buf(),
        source,
    })?;
    let decision = match want {
        Want::Premium(b) => c.request_bandwidth(flow, b)?,
        Want::BestEffort(w) => c.best_effort(flow, w)?,
    };
    drop(c);
    match decision {
        Decision::Granted(g) => granted(&g),
        Decision::Rejected(r) => return Ok(Ended::Rejected(r)),
    }
    forward_signals();
    let mut child = match std::process::Command::new(program).args(args).spawn() {
        Ok(c) => c,
        Err(error) => {
            release(socket, flow)?;
            return Err(ExecError::Spawn {
                program: program.clone(),
                error,
            });
        }
    };
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    let status = child.wait();
    CHILD.store(0, Ordering::SeqCst);
    release(socket, flow)?;
    let status = status.map_err(|source| ExecError::Wait {
        program: program.clone(),
        source,
    })?;
    use std::os::unix::process::ExitStatusExt;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    };
    Ok(Ended::Exited(code.clamp(0, 255) as u8))
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    use super::*;
    use crate::protocol::{
        EndpointSpec, FlowSpec, LocalOp, LocalReply, LocalRequest, LocalResult, Owner,
    };

    /// An agent on `socket` that grants (or, `reject`, refuses) every request and counts
    /// releases; each connection carries one operation, as `run` makes them.
    fn fake_agent(socket: &Path, reject: bool) -> Arc<AtomicUsize> {
        let listener = UnixListener::bind(socket).unwrap();
        let released = Arc::new(AtomicUsize::new(0));
        let count = released.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let mut conn = conn.unwrap();
                let mut line = String::new();
                BufReader::new(&conn).read_line(&mut line).unwrap();
                let spec = |dst: EndpointSpec| FlowSpec {
                    src: EndpointSpec {
                        node: "n0".into(),
                        port: 0,
                    },
                    dst,
                    priority: 0,
                };
                let result = match LocalRequest::parse(line.as_bytes()).unwrap().op {
                    LocalOp::Request { .. } if reject => LocalResult::Decision {
                        decision: Decision::Rejected(RejectionInfo {
                            criterion: 1,
                            criterion_name: "source-node".into(),
                            resource: "node n0 send".into(),
                            reserved: 0,
                            requested: 1,
                            capacity: 0,
                            message: "no room".into(),
                        }),
                    },
                    LocalOp::Request { dst, .. } => LocalResult::Decision {
                        decision: Decision::Granted(IdtEntry {
                            flow: spec(dst),
                            name: String::new(),
                            class: "best_effort".into(),
                            rate: 1000,
                            idt_ps: Some(1),
                            weight: 1,
                            owner: Owner { uid: 0, pid: 1 },
                        }),
                    },
                    LocalOp::Release { dst, .. } => {
                        count.fetch_add(1, Ordering::SeqCst);
                        LocalResult::Released { flow: spec(dst) }
                    }
                    other => panic!("unexpected {other:?}"),
                };
                let reply = LocalReply {
                    v: crate::protocol::PROTOCOL_VERSION,
                    ok: true,
                    result: Some(result),
                    error: None,
                };
                let mut text = serde_json::to_vec(&reply).unwrap();
                text.push(b'\n');
                conn.write_all(&text).unwrap();
            }
        });
        released
    }

    fn cmd(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_programs_status_comes_back_and_the_flow_is_released() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("agent.sock");
        let released = fake_agent(&socket, false);
        let flow = LocalFlow::new(0, "n1", 0);
        let mut grants = 0;
        let ended = run(
            &socket,
            &flow,
            Want::BestEffort(1),
            &cmd(&["sh", "-c", "exit 7"]),
            |_| grants += 1,
        );
        assert_eq!(ended.unwrap(), Ended::Exited(7));
        assert_eq!((grants, released.load(Ordering::SeqCst)), (1, 1));
        let killed = run(
            &socket,
            &flow,
            Want::Premium(1000),
            &cmd(&["sh", "-c", "kill -TERM $$"]),
            |_| {},
        );
        assert_eq!(killed.unwrap(), Ended::Exited(128 + libc::SIGTERM as u8));
        // A program that cannot start: an error, and the flow is given back all the same.
        let e = run(
            &socket,
            &flow,
            Want::BestEffort(1),
            &cmd(&["/nonexistent/prog"]),
            |_| {},
        );
        assert!(e
            .unwrap_err()
            .to_string()
            .starts_with("cannot run '/nonexistent/prog': "));
        assert_eq!(released.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_rejection_runs_nothing_and_no_agent_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("agent.sock");
        let released = fake_agent(&socket, true);
        let flow = LocalFlow::new(0, "n1", 0);
        let marker = dir.path().join("ran");
        let touch = cmd(&["touch", marker.to_str().unwrap()]);
        let ended = run(&socket, &flow, Want::Premium(1), &touch, |_| {
            panic!("granted")
        })
        .unwrap();
        assert!(matches!(ended, Ended::Rejected(r) if r.message == "no room"));
        assert!(!marker.exists() && released.load(Ordering::SeqCst) == 0);
        let e = run(
            &dir.path().join("none.sock"),
            &flow,
            Want::Premium(1),
            &touch,
            |_| {},
        );
        assert!(e.unwrap_err().to_string().starts_with("agent socket "));
    }
}

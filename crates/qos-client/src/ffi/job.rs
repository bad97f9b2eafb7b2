//! C ABI for job reservations (`docs/jobs.md`; header `include/clusterqos.h`): all of a
//! job's flows reserved at once or none, through the node's agent, held by a process
//! (released by `cq_job_release`, or one lease after that process ends); and the call
//! that puts a job's process into the cgroup by which the node tells the job's traffic
//! (what the Slurm plugin calls for each task).

use std::ffi::{c_char, c_int};

use qos_runtime::protocol::job::{JobBody, JobDecision, JobFlow, Pattern};
use qos_runtime::protocol::LocalJob;

use super::{agent, done, set_error, str_arg};
use crate::Error;

/// One flow of an explicit job list.
#[repr(C)]
pub struct CqJobFlow {
    /// Source node (NUL-terminated).
    pub src: *const c_char,
    /// Destination node (NUL-terminated).
    pub dst: *const c_char,
    /// Bytes per second.
    pub bytes_per_sec: u64,
    /// Source port (0 with `dst_port` 0: told by the job's cgroup).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

fn decided(r: std::thread::Result<Result<JobDecision, Error>>) -> c_int {
    match r.unwrap_or_else(|_| Err(Error::Manager("internal error".into()))) {
        Ok(JobDecision::Granted(_)) => 0,
        Ok(JobDecision::Rejected { message, .. }) => {
            set_error(message);
            1
        }
        Err(e) => done(Err(e)),
    }
}

/// Reserves through `agent_socket`, for process `pid` (0: the caller).
unsafe fn reserve(
    agent_socket: *const c_char,
    id: *const c_char,
    body: JobBody,
    wait_s: u32,
    pid: u32,
) -> Result<JobDecision, Error> {
    // SAFETY: per the caller's contract.
    let id = unsafe { str_arg(id, "id") }?;
    // SAFETY: per the caller's contract.
    let mut c = unsafe { agent(agent_socket) }?;
    if pid != 0 {
        c.on_behalf_of(pid);
    }
    c.reserve_job(LocalJob {
        id: id.to_string(),
        body,
        lease_ms: None,
        wait_s: (wait_s > 0).then_some(wait_s),
    })
    .map_err(|e| Error::Manager(e.to_string()))
}

/// Reserves job `id`: every flow of `pattern` ("all-to-all", "ring",
/// "nearest-neighbour", "one-to-many") over `nodes` (comma-separated, in order), each
/// at `bytes_per_sec`. Waits up to `wait_s` seconds in line for room (0: decided at
/// once). Held by process `pid` (0: the caller). 0 granted, 1 rejected (the reason,
/// naming the first resource short, in `cq_last_error`), -1 error.
///
/// # Safety
/// Strings NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn cq_job_reserve(
    agent_socket: *const c_char,
    id: *const c_char,
    pattern: *const c_char,
    nodes: *const c_char,
    bytes_per_sec: u64,
    wait_s: u32,
    pid: u32,
) -> c_int {
    decided(std::panic::catch_unwind(
        || -> Result<JobDecision, Error> {
            // SAFETY: per the contract.
            let pattern = unsafe { str_arg(pattern, "pattern") }?
                .parse::<Pattern>()
                .map_err(Error::Manager)?;
            // SAFETY: per the contract.
            let nodes = unsafe { str_arg(nodes, "nodes") }?
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect();
            let body = JobBody::Pattern {
                pattern,
                nodes,
                rate: bytes_per_sec,
                class: "premium".into(),
            };
            // SAFETY: per the contract.
            unsafe { reserve(agent_socket, id, body, wait_s, pid) }
        },
    ))
}

/// Reserves job `id`: the `count` flows of `flows`. As [`cq_job_reserve`] otherwise.
///
/// # Safety
/// Strings NUL-terminated; `flows` valid for `count` elements.
#[no_mangle]
pub unsafe extern "C" fn cq_job_reserve_flows(
    agent_socket: *const c_char,
    id: *const c_char,
    flows: *const CqJobFlow,
    count: usize,
    wait_s: u32,
    pid: u32,
) -> c_int {
    decided(std::panic::catch_unwind(
        || -> Result<JobDecision, Error> {
            if flows.is_null() && count > 0 {
                return Err(Error::Manager("flows is NULL".into()));
            }
            let list = if count == 0 {
                &[][..]
            } else {
                // SAFETY: per the contract.
                unsafe { std::slice::from_raw_parts(flows, count) }
            };
            let mut v = Vec::with_capacity(count);
            for f in list {
                v.push(JobFlow {
                    // SAFETY: per the contract.
                    src: unsafe { str_arg(f.src, "flow src") }?.to_string(),
                    // SAFETY: per the contract.
                    dst: unsafe { str_arg(f.dst, "flow dst") }?.to_string(),
                    rate: f.bytes_per_sec,
                    src_port: f.src_port,
                    dst_port: f.dst_port,
                    class: "premium".into(),
                });
            }
            // SAFETY: per the contract.
            unsafe { reserve(agent_socket, id, JobBody::Flows { flows: v }, wait_s, pid) }
        },
    ))
}

/// Releases job `id`, reserved through this node's agent by the caller's user. 0 or -1.
///
/// # Safety
/// Strings NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn cq_job_release(agent_socket: *const c_char, id: *const c_char) -> c_int {
    let r = std::panic::catch_unwind(|| -> Result<(), Error> {
        // SAFETY: per the contract.
        let id = unsafe { str_arg(id, "id") }?;
        // SAFETY: per the contract.
        let mut c = unsafe { agent(agent_socket) }?;
        c.release_job(id).map_err(|e| Error::Manager(e.to_string()))
    });
    done(r.unwrap_or_else(|_| Err(Error::Manager("internal error".into()))))
}

/// Puts process `pid` (0: the caller) into the cgroup by which this node's agent tells
/// job `id`'s traffic (the kernel backend's); the job must be held and name this node.
/// Sockets the process opens from then on carry the job's reservation. 0 or -1.
///
/// # Safety
/// Strings NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn cq_job_join(
    agent_socket: *const c_char,
    id: *const c_char,
    pid: u32,
) -> c_int {
    let r = std::panic::catch_unwind(|| -> Result<(), Error> {
        // SAFETY: per the contract.
        let id = unsafe { str_arg(id, "id") }?;
        // SAFETY: per the contract.
        let mut c = unsafe { agent(agent_socket) }?;
        c.join_job(id, pid)
            .map(|_| ())
            .map_err(|e| Error::Manager(e.to_string()))
    });
    done(r.unwrap_or_else(|_| Err(Error::Manager("internal error".into()))))
}

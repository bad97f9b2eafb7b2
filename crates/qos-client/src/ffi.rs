//! C ABI over [`crate::Port`] (header `include/clusterqos.h`), so C programs — and MPI
//! later, as thesis §4.4 did with MPICH-GM — can use clusterqos ports.
//!
//! Conventions: functions return 0 (or a byte count) on success and a negative value on
//! failure; `cq_last_error()` then describes the failure of the calling thread's last
//! call. No function panics across the boundary.

pub mod job;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_long, c_void, CStr, CString};
use std::time::Duration;

use crate::{Error, Grant, Port, PortOptions};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: String) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Information about a received message.
#[repr(C)]
pub struct CqRecvInfo {
    pub src_node: [c_char; 64],
    pub src_port: u16,
    pub priority: u8,
}

unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(Error::Manager(format!("{what} is NULL")));
    }
    // SAFETY: caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::Manager(format!("{what} is not UTF-8")))
}

/// Message describing the last failure on this thread (never NULL).
#[no_mangle]
pub extern "C" fn cq_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Opens a port on the agent at `socket_path`; `port < 0` lets the agent choose.
/// Returns NULL on failure.
///
/// # Safety
/// `socket_path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cq_open(socket_path: *const c_char, port: c_int) -> *mut Port {
    let r = std::panic::catch_unwind(|| -> Result<Port, Error> {
        // SAFETY: per the function's contract.
        let path = unsafe { str_arg(socket_path, "socket_path") }?;
        let mut o = PortOptions::new(path);
        if (0..=i32::from(u16::MAX)).contains(&port) {
            o = o.port(port as u16);
        }
        Port::open(o)
    });
    match r {
        Ok(Ok(p)) => Box::into_raw(Box::new(p)),
        Ok(Err(e)) => {
            set_error(e.to_string());
            std::ptr::null_mut()
        }
        Err(_) => {
            set_error("internal error".into());
            std::ptr::null_mut()
        }
    }
}

/// The port's number, or -1 for NULL.
///
/// # Safety
/// `port` must be NULL or a pointer returned by `cq_open` and not yet closed.
#[no_mangle]
pub unsafe extern "C" fn cq_port_number(port: *const Port) -> c_int {
    // SAFETY: per the contract.
    unsafe { port.as_ref() }.map_or(-1, |p| c_int::from(p.number()))
}

/// Sends `len` bytes to (`dst_node`, `dst_port`) at `priority`. 0 on success.
///
/// # Safety
/// `port` from `cq_open`; `dst_node` NUL-terminated; `buf` readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cq_send(
    port: *mut Port,
    dst_node: *const c_char,
    dst_port: u16,
    priority: u8,
    buf: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: per the contract.
    let Some(p) = (unsafe { port.as_mut() }) else {
        set_error("port is NULL".into());
        return -1;
    };
    if buf.is_null() && len > 0 {
        set_error("buf is NULL".into());
        return -1;
    }
    // SAFETY: per the contract.
    let r = unsafe { str_arg(dst_node, "dst_node") }.and_then(|node| {
        let data = if len == 0 {
            &[][..]
        } else {
            unsafe { std::slice::from_raw_parts(buf as *const u8, len) }
        };
        p.send(node, dst_port, priority, data)
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_error(e.to_string());
            -1
        }
    }
}

/// Waits until all sends have completed (up to `timeout_ms`). 0 on success.
///
/// # Safety
/// `port` from `cq_open`.
#[no_mangle]
pub unsafe extern "C" fn cq_flush(port: *mut Port, timeout_ms: c_int) -> c_int {
    // SAFETY: per the contract.
    let Some(p) = (unsafe { port.as_mut() }) else {
        return -1;
    };
    match p.flush(Duration::from_millis(timeout_ms.max(0) as u64)) {
        Ok(()) => 0,
        Err(e) => {
            set_error(e.to_string());
            -1
        }
    }
}

/// Receives one message into `buf` (capacity `cap`), waiting up to `timeout_ms`.
/// Returns its length; -2 on timeout; -1 on error. A message longer than `cap` is not
/// taken: nothing is copied, `info` is filled, the message stays first in line and its
/// length (greater than `cap`) is returned, so the caller can call again with a buffer
/// that large (as `recv` with MSG_PEEK|MSG_TRUNC lets one do). `buf` may be NULL when
/// `cap` is 0 (to learn the next message's length).
///
/// # Safety
/// `port` from `cq_open`; `buf` writable for `cap` bytes (or NULL with `cap` 0); `info`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cq_recv(
    port: *mut Port,
    buf: *mut c_void,
    cap: usize,
    timeout_ms: c_int,
    info: *mut CqRecvInfo,
) -> c_long {
    // SAFETY: per the contract.
    let Some(p) = (unsafe { port.as_mut() }) else {
        set_error("port is NULL".into());
        return -1;
    };
    if buf.is_null() && cap > 0 {
        set_error("buf is NULL but cap is not 0".into());
        return -1;
    }
    let m = match p.peek(Duration::from_millis(timeout_ms.max(0) as u64)) {
        Ok(m) => m,
        Err(Error::Timeout) => return -2,
        Err(e) => {
            set_error(e.to_string());
            return -1;
        }
    };
    // SAFETY: per the contract.
    if let Some(i) = unsafe { info.as_mut() } {
        i.src_node = [0; 64];
        for (d, s) in i.src_node.iter_mut().zip(m.src_node.bytes().take(63)) {
            *d = s as c_char;
        }
        i.src_port = m.src_port;
        i.priority = m.priority;
    }
    let len = m.data.len();
    if len > cap {
        set_error(format!(
            "message of {len} bytes does not fit the {cap}-byte buffer; it is kept"
        ));
        return len as c_long;
    }
    if len > 0 {
        // SAFETY: per the contract; `len <= cap` and `buf` is not NULL (cap > 0).
        unsafe { std::ptr::copy_nonoverlapping(m.data.as_ptr(), buf as *mut u8, len) };
    }
    let _ = p.recv(Duration::ZERO);
    len as c_long
}

/// Points `port` at the local agent's socket and runs one manager call `f` for the flow
/// towards `dst_node` (the shared part of the three manager calls below).
///
/// # Safety
/// As for those calls.
unsafe fn manager_call<T>(
    port: *mut Port,
    manager_socket: *const c_char,
    dst_node: *const c_char,
    f: impl FnOnce(&mut Port, &str) -> Result<T, Error>,
) -> Result<T, Error> {
    // SAFETY: per the callers' contract.
    let p = unsafe { port.as_mut() }.ok_or_else(|| Error::Manager("port is NULL".into()))?;
    // SAFETY: per the callers' contract.
    p.opts.manager_socket = unsafe { str_arg(manager_socket, "manager_socket") }?.into();
    // SAFETY: per the callers' contract.
    let node = unsafe { str_arg(dst_node, "dst_node") }?;
    f(p, node)
}

/// 0 on success; -1 with `cq_last_error` set on failure.
fn done(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_error(e.to_string());
            -1
        }
    }
}

/// Asks the manager (through the local agent at `manager_socket`) for `bytes_per_sec`
/// on the flow from `port` to (`dst_node`, `dst_port`). 0 granted, 1 rejected (reason
/// in `cq_last_error`), -1 error.
///
/// # Safety
/// `port` from `cq_open`; strings NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn cq_request_bandwidth(
    port: *mut Port,
    manager_socket: *const c_char,
    dst_node: *const c_char,
    dst_port: u16,
    bytes_per_sec: u64,
) -> c_int {
    // SAFETY: per the contract.
    let r = unsafe {
        manager_call(port, manager_socket, dst_node, |p, node| {
            p.request_bandwidth(node, dst_port, bytes_per_sec)
        })
    };
    match r {
        Ok(Grant::Granted) => 0,
        Ok(Grant::Rejected(why)) => {
            set_error(why);
            1
        }
        Err(e) => done(Err(e)),
    }
}

/// Registers the flow from `port` to (`dst_node`, `dst_port`) as best-effort with
/// `weight` (1 ..= 1,000,000): its rate then follows the manager's current share of the
/// surplus. 0 registered, -1 error (reason in `cq_last_error`).
///
/// # Safety
/// `port` from `cq_open`; strings NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn cq_best_effort(
    port: *mut Port,
    manager_socket: *const c_char,
    dst_node: *const c_char,
    dst_port: u16,
    weight: u32,
) -> c_int {
    // SAFETY: per the contract.
    done(unsafe {
        manager_call(port, manager_socket, dst_node, |p, node| {
            p.best_effort(node, dst_port, weight)
        })
    })
}

/// Releases the flow from `port` to (`dst_node`, `dst_port`). 0 on success.
///
/// # Safety
/// `port` from `cq_open`; strings NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn cq_release(
    port: *mut Port,
    manager_socket: *const c_char,
    dst_node: *const c_char,
    dst_port: u16,
) -> c_int {
    // SAFETY: per the contract.
    done(unsafe {
        manager_call(port, manager_socket, dst_node, |p, node| {
            p.release(node, dst_port)
        })
    })
}

/// Closes a port (NULL is ignored).
///
/// # Safety
/// `port` from `cq_open`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn cq_close(port: *mut Port) {
    if !port.is_null() {
        // SAFETY: per the contract, the pointer came from Box::into_raw.
        drop(unsafe { Box::from_raw(port) });
    }
}

/// The agent at `manager_socket`, through a fresh connection.
unsafe fn agent(manager_socket: *const c_char) -> Result<qos_runtime::client::Client, Error> {
    // SAFETY: per the caller's contract.
    let path = unsafe { str_arg(manager_socket, "manager_socket") }?;
    qos_runtime::client::Client::connect(path).map_err(|e| Error::Manager(format!("{path}: {e}")))
}

/// Writes the name of the agent's node (NUL-terminated) into `buf` of `cap` bytes. 0 on
/// success, -1 on error (also when the name does not fit).
///
/// # Safety
/// `manager_socket` NUL-terminated; `buf` valid for `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn cq_agent_node(
    manager_socket: *const c_char,
    buf: *mut c_char,
    cap: usize,
) -> c_int {
    let r = std::panic::catch_unwind(|| -> Result<(), Error> {
        // SAFETY: per the contract.
        let mut c = unsafe { agent(manager_socket) }?;
        let node = c.node().map_err(|e| Error::Manager(e.to_string()))?;
        if buf.is_null() || node.len() + 1 > cap {
            return Err(Error::Manager(format!(
                "node name '{node}' does not fit in {cap} bytes"
            )));
        }
        // SAFETY: `buf` holds `cap` > node.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(node.as_ptr().cast::<c_char>(), buf, node.len());
            *buf.add(node.len()) = 0;
        }
        Ok(())
    });
    done(r.unwrap_or_else(|_| Err(Error::Manager("internal error".into()))))
}

/// Asks the manager, through the agent at `manager_socket`, for the flow from this
/// node's `src_port` to (`dst_node`, `dst_port`) at `priority`: premium with
/// `bytes_per_sec` > 0, best-effort with `weight` when `bytes_per_sec` is 0. The flow
/// belongs to process `pid` (0: the caller). Not tied to a port: for programs whose
/// traffic the agent's kernel backend enforces. 0 granted (`*rate`, if not NULL, gets
/// the granted or current rate in bytes/s), 1 rejected (reason in `cq_last_error`),
/// -1 error.
///
/// # Safety
/// Strings NUL-terminated; `rate` NULL or valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cq_flow_request(
    manager_socket: *const c_char,
    src_port: u16,
    dst_node: *const c_char,
    dst_port: u16,
    priority: u8,
    bytes_per_sec: u64,
    weight: u32,
    pid: u32,
    rate: *mut u64,
) -> c_int {
    use qos_runtime::protocol::Decision;
    let r = std::panic::catch_unwind(|| -> Result<Decision, Error> {
        // SAFETY: per the contract.
        let mut c = unsafe { agent(manager_socket) }?;
        // SAFETY: per the contract.
        let node = unsafe { str_arg(dst_node, "dst_node") }?;
        if pid != 0 {
            c.on_behalf_of(pid);
        }
        let mut flow = qos_runtime::client::LocalFlow::new(src_port, node, dst_port);
        flow.priority = priority;
        let d = if bytes_per_sec > 0 {
            c.request_bandwidth(&flow, bytes_per_sec)
        } else {
            c.best_effort(&flow, weight)
        };
        d.map_err(|e| Error::Manager(e.to_string()))
    });
    match r.unwrap_or_else(|_| Err(Error::Manager("internal error".into()))) {
        Ok(Decision::Granted(g)) => {
            if !rate.is_null() {
                // SAFETY: per the contract.
                unsafe { *rate = g.rate };
            }
            0
        }
        Ok(Decision::Rejected(r)) => {
            set_error(r.message);
            1
        }
        Err(e) => done(Err(e)),
    }
}

/// Releases the flow from this node's `src_port` to (`dst_node`, `dst_port`) at
/// `priority`, through the agent at `manager_socket`. 0 on success, -1 on error.
///
/// # Safety
/// Strings NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn cq_flow_release(
    manager_socket: *const c_char,
    src_port: u16,
    dst_node: *const c_char,
    dst_port: u16,
    priority: u8,
) -> c_int {
    let r = std::panic::catch_unwind(|| -> Result<(), Error> {
        // SAFETY: per the contract.
        let mut c = unsafe { agent(manager_socket) }?;
        // SAFETY: per the contract.
        let node = unsafe { str_arg(dst_node, "dst_node") }?;
        let mut flow = qos_runtime::client::LocalFlow::new(src_port, node, dst_port);
        flow.priority = priority;
        c.release(&flow)
            .map(|_| ())
            .map_err(|e| Error::Manager(e.to_string()))
    });
    done(r.unwrap_or_else(|_| Err(Error::Manager("internal error".into()))))
}

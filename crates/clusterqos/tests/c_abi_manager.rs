//! The C ABI's bandwidth-manager calls against real processes: a master and agents with
//! data planes on loopback, driven through `cq_request_bandwidth`, `cq_best_effort` and
//! `cq_release` exactly as a C program would call them.

mod common;

use std::ffi::{CStr, CString};
use std::path::Path;

use common::loopback::Cluster;
use qos_client::ffi::{
    cq_best_effort, cq_close, cq_last_error, cq_open, cq_release, cq_request_bandwidth,
};

fn cstr(p: &Path) -> CString {
    CString::new(p.to_str().unwrap()).unwrap()
}

fn last_error() -> String {
    // SAFETY: cq_last_error returns NULL or a NUL-terminated string of this thread.
    unsafe {
        let e = cq_last_error();
        if e.is_null() {
            String::new()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

#[test]
fn c_callers_reserve_register_best_effort_and_release_through_their_agent() {
    let c = Cluster::start(2, 40.0);
    let (dp, mgr) = (cstr(&c.dp_socket(0)), cstr(&c.agent_socket(0)));
    let n1 = CString::new("n1").unwrap();
    // SAFETY: ports come from cq_open and are closed once; strings are NUL-terminated.
    unsafe {
        let p = cq_open(dp.as_ptr(), 31);
        assert!(!p.is_null(), "{}", last_error());
        let q = cq_open(dp.as_ptr(), 32);
        assert!(!q.is_null(), "{}", last_error());
        assert_eq!(
            cq_request_bandwidth(p, mgr.as_ptr(), n1.as_ptr(), 0, 10_000_000),
            0,
            "{}",
            last_error()
        );
        // Above the node's Bmax: rejected, with the reason.
        assert_eq!(
            cq_request_bandwidth(q, mgr.as_ptr(), n1.as_ptr(), 0, 100_000_000),
            1
        );
        assert!(
            last_error().to_lowercase().contains("bmax"),
            "{}",
            last_error()
        );
        assert_eq!(
            cq_best_effort(q, mgr.as_ptr(), n1.as_ptr(), 1, 3),
            0,
            "{}",
            last_error()
        );
        // A weight out of range is an error that names it.
        assert_eq!(cq_best_effort(q, mgr.as_ptr(), n1.as_ptr(), 2, 0), -1);
        assert!(last_error().contains("weight"), "{}", last_error());
        assert_eq!(
            cq_release(p, mgr.as_ptr(), n1.as_ptr(), 0),
            0,
            "{}",
            last_error()
        );
        assert_eq!(cq_release(p, mgr.as_ptr(), n1.as_ptr(), 0), -1);
        assert!(!last_error().is_empty());
        assert_eq!(
            cq_release(q, mgr.as_ptr(), n1.as_ptr(), 1),
            0,
            "{}",
            last_error()
        );
        cq_close(p);
        cq_close(q);
    }
}

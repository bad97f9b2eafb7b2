//! The manager's clients for operators' scripts: the master over HTTP(S)
//! (`qos_runtime::master_client`, protocol v1 Part 2, docs/protocol.md) and the node
//! agent over its Unix socket (`qos_runtime::client`, Part 1: what `clusterqos
//! request` / `release` / `status` use). Requests and replies cross as the protocol's
//! JSON; refusals and unreachable services raise `ManagerError` with the protocol's
//! error code and one-line message.

use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::prelude::*;
use qos_runtime::auth::Secret;
use qos_runtime::client::{Client, ClientError};
use qos_runtime::master_client::MasterClient;
use qos_runtime::protocol::job::JobRequest;
use qos_runtime::protocol::{ErrorCode, FlowRequest, FlowSpec, LocalOp, Owner, WireError};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::errors;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MasterConnection>()?;
    m.add_class::<AgentConnection>()?;
    m.add_function(pyo3::wrap_pyfunction!(parse_bandwidth, m)?)?;
    Ok(())
}

/// A bandwidth as `clusterqos request --bandwidth` reads it ("40MB/s", "320Mbit/s"),
/// in bytes per second.
#[pyfunction]
fn parse_bandwidth(py: Python<'_>, text: &str) -> PyResult<u64> {
    text.parse::<qos_core::units::Bandwidth>()
        .map(|b| b.bytes_per_sec())
        .map_err(|e| errors::manager(py, "bad_request", format!("bandwidth '{text}': {e}")))
}

fn code_name(code: ErrorCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{code:?}"))
}

fn wire(py: Python<'_>, e: WireError) -> PyErr {
    errors::manager(py, &code_name(e.code), e.message)
}

fn decode<T: DeserializeOwned>(py: Python<'_>, what: &str, json: &str) -> PyResult<T> {
    serde_json::from_str(json)
        .map_err(|e| errors::manager(py, "bad_request", format!("{what}: {e}")))
}

fn encode<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A connection to the master bandwidth manager, speaking for one node.
#[pyclass(module = "clusterqos._native", frozen)]
pub struct MasterConnection {
    client: MasterClient,
    rt: tokio::runtime::Runtime,
}

#[pymethods]
impl MasterConnection {
    /// `url`: "http://HOST:PORT" or "https://HOST:PORT" (then `ca`, and `cert` + `key`
    /// for mutual TLS); `secret`: the cluster's shared secret (the text).
    #[new]
    #[pyo3(signature = (url, node, secret, ca=None, cert=None, key=None))]
    fn new(
        py: Python<'_>,
        url: &str,
        node: &str,
        secret: &str,
        ca: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
    ) -> PyResult<Self> {
        let secret =
            Secret::new(secret).map_err(|e| errors::manager(py, "bad_request", e.to_string()))?;
        let mut client = MasterClient::new(url, node, &secret).map_err(|e| wire(py, e))?;
        if let Some(ca) = ca {
            let identity = match (&cert, &key) {
                (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
                (None, None) => None,
                _ => {
                    return Err(errors::manager(
                        py,
                        "bad_request",
                        "give both cert and key for mutual TLS",
                    ))
                }
            };
            let config = qos_runtime::tls::client_config(&ca, identity)
                .map_err(|e| errors::manager(py, "bad_request", e.to_string()))?;
            client = client.with_tls(config).map_err(|e| wire(py, e))?;
        }
        // One thread: each call runs the client to completion on the caller's thread.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| errors::manager(py, "internal", format!("async runtime: {e}")))?;
        Ok(MasterConnection { client, rt })
    }

    /// The node this connection speaks for.
    #[getter]
    fn node(&self) -> String {
        self.client.node().to_string()
    }

    /// `POST /v1/agents/{node}/register`: JSON of the lease terms.
    fn register(&self, py: Python<'_>) -> PyResult<String> {
        let r = py.detach(|| self.rt.block_on(self.client.register()));
        r.map(|v| encode(&v)).map_err(|e| wire(py, e))
    }

    /// `POST /v1/agents/{node}/heartbeat` listing live owners (JSON `[Owner...]`).
    fn heartbeat(&self, py: Python<'_>, live: &str) -> PyResult<()> {
        let live: Vec<Owner> = decode(py, "live owners", live)?;
        let r = py.detach(|| self.rt.block_on(self.client.heartbeat(live)));
        r.map_err(|e| wire(py, e))
    }

    /// `POST /v1/agents/{node}/flows` with a FlowRequest (JSON): the Decision (JSON).
    fn request(&self, py: Python<'_>, request: &str) -> PyResult<String> {
        let req: FlowRequest = decode(py, "flow request", request)?;
        let r = py.detach(|| self.rt.block_on(self.client.request(&req)));
        r.map(|v| encode(&v)).map_err(|e| wire(py, e))
    }

    /// `POST /v1/agents/{node}/flows/release` of a Flow (JSON) owned by `owner` (JSON).
    fn release(&self, py: Python<'_>, flow: &str, owner: &str) -> PyResult<()> {
        let flow: FlowSpec = decode(py, "flow", flow)?;
        let owner: Owner = decode(py, "owner", owner)?;
        let r = py.detach(|| self.rt.block_on(self.client.release(flow, owner)));
        r.map_err(|e| wire(py, e))
    }

    /// `GET /v1/status`: the StatusReport (JSON).
    fn status(&self, py: Python<'_>) -> PyResult<String> {
        let r = py.detach(|| self.rt.block_on(self.client.status()));
        r.map(|v| encode(&v)).map_err(|e| wire(py, e))
    }

    /// `POST /v1/jobs` with a JobRequest (JSON): the JobDecision (JSON).
    fn reserve_job(&self, py: Python<'_>, request: &str) -> PyResult<String> {
        let req: JobRequest = decode(py, "job request", request)?;
        let r = py.detach(|| self.rt.block_on(self.client.reserve_job(&req)));
        r.map(|v| encode(&v)).map_err(|e| wire(py, e))
    }

    /// `POST /v1/jobs/{id}/release` for `owner`.
    fn release_job(&self, py: Python<'_>, id: &str, owner: &str) -> PyResult<()> {
        let r = py.detach(|| self.rt.block_on(self.client.release_job(id, owner)));
        r.map_err(|e| wire(py, e))
    }

    /// `POST /v1/jobs/{id}/renew` for `owner`.
    fn renew_job(&self, py: Python<'_>, id: &str, owner: &str) -> PyResult<()> {
        let r = py.detach(|| self.rt.block_on(self.client.renew_job(id, owner)));
        r.map_err(|e| wire(py, e))
    }

    /// `GET /v1/jobs`: every job held (JSON list).
    fn jobs(&self, py: Python<'_>) -> PyResult<String> {
        let r = py.detach(|| self.rt.block_on(self.client.jobs()));
        r.map(|v| encode(&v)).map_err(|e| wire(py, e))
    }

    /// `GET /v1/flows`: every flow's IDT entry (JSON list).
    fn flows(&self, py: Python<'_>) -> PyResult<String> {
        let r = py.detach(|| self.rt.block_on(self.client.flows()));
        r.map(|v| encode(&v)).map_err(|e| wire(py, e))
    }
}

/// A connection to a node's agent over its Unix socket.
#[pyclass(module = "clusterqos._native", frozen)]
pub struct AgentConnection {
    client: Mutex<Client>,
}

fn client_err(py: Python<'_>, e: ClientError) -> PyErr {
    match e {
        ClientError::Refused(w) => wire(py, w),
        other => errors::manager(py, "unavailable", other.to_string()),
    }
}

#[pymethods]
impl AgentConnection {
    /// Connects to the agent's socket at `socket`.
    #[new]
    fn new(py: Python<'_>, socket: PathBuf) -> PyResult<Self> {
        let c = Client::connect(&socket).map_err(|e| {
            errors::manager(
                py,
                "unavailable",
                format!("agent socket {}: {e}", socket.display()),
            )
        })?;
        Ok(AgentConnection {
            client: Mutex::new(c),
        })
    }

    /// Sends one operation (JSON of the protocol's `op` object, without `v`) and
    /// returns the result (JSON).
    fn call(&self, py: Python<'_>, op: &str) -> PyResult<String> {
        let op: LocalOp = decode(py, "operation", op)?;
        let r = py.detach(|| match self.client.lock() {
            Ok(mut c) => c.call(op),
            Err(_) => Err(ClientError::Protocol(
                "a previous call on this connection failed mid-way".into(),
            )),
        });
        r.map(|v| encode(&v)).map_err(|e| client_err(py, e))
    }
}

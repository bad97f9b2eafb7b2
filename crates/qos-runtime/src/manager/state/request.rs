//! A flow request as the books take it (thesis §3.3.1, §4.3): the protocol's
//! [`FlowRequest`] checked once at the edge — names resolved to the topology's ids, the
//! class's ranges checked, the source node matched with the asking agent — into core
//! types, so that admission works on checked values only.

use qos_core::flow::{Class, Endpoint, Flow, FlowKey, Weight};
use qos_core::topology::{NodeId, Topology};
use qos_core::units::Bandwidth;

use super::error::BooksError;
use crate::protocol::{check_name, ClassSpec, EndpointSpec, FlowRequest, FlowSpec, Owner};

/// A checked request for one flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionRequest {
    /// The flow in the core's terms (ids, class), named.
    pub flow: Flow,
    /// Its identity with node names, as rows and the store keep it.
    pub spec: FlowSpec,
    /// The class as requested (the store keeps it).
    pub class: ClassSpec,
    /// The requesting process.
    pub owner: Owner,
}

/// A node's id by name.
pub fn node_id(topo: &Topology, name: &str) -> Result<NodeId, BooksError> {
    topo.node_id(name)
        .ok_or_else(|| BooksError::UnknownNode(name.to_string()))
}

fn endpoint(topo: &Topology, e: &EndpointSpec) -> Result<Endpoint, BooksError> {
    Ok(Endpoint {
        node: node_id(topo, &e.node)?,
        port: e.port,
    })
}

/// The core's key for a flow named on the wire: names checked, nodes in the topology.
pub fn flow_key(topo: &Topology, f: &FlowSpec) -> Result<FlowKey, BooksError> {
    f.validate().map_err(|e| BooksError::Invalid(e.message))?;
    Ok(FlowKey {
        src: endpoint(topo, &f.src)?,
        dst: endpoint(topo, &f.dst)?,
        priority: f.priority,
    })
}

/// The core's class for a class named on the wire (ranges checked).
pub fn core_class(class: ClassSpec) -> Result<Class, BooksError> {
    class
        .validate()
        .map_err(|e| BooksError::Invalid(e.message))?;
    Ok(match class {
        ClassSpec::Premium { bandwidth } => Class::Premium {
            bandwidth: Bandwidth::from_bytes_per_sec(bandwidth),
        },
        ClassSpec::BestEffort { weight } => Class::BestEffort {
            weight: Weight(weight),
        },
    })
}

impl AdmissionRequest {
    /// Checks `req`, sent by the agent of node `agent`, against `topo`.
    pub fn check(topo: &Topology, agent: &str, req: FlowRequest) -> Result<Self, BooksError> {
        let class = core_class(req.class)?;
        if let Some(n) = &req.name {
            check_name("flow name", n).map_err(|e| BooksError::Invalid(e.message))?;
        }
        if req.flow.src.node != agent {
            return Err(BooksError::WrongSource {
                agent: agent.to_string(),
                source_node: req.flow.src.node.clone(),
            });
        }
        let key = flow_key(topo, &req.flow)?;
        let name = req.name.unwrap_or_else(|| req.flow.to_string());
        Ok(AdmissionRequest {
            flow: Flow { key, name, class },
            spec: req.flow,
            class: req.class,
            owner: req.owner,
        })
    }

    /// Whether it asks for a reservation.
    pub fn is_premium(&self) -> bool {
        matches!(self.class, ClassSpec::Premium { .. })
    }
}

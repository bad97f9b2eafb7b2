//! What travels on the Myrinet links between NICs (thesis §4.1): GM data packets and
//! cumulative acknowledgements. A NIC builds a [`Packet`] and hands it to the fabric,
//! which gives it to the destination NIC when its tail has arrived.

use qos_core::topology::NodeId;

use super::ids::FlowKey;

/// A data packet's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data {
    /// The flow it belongs to.
    pub flow: FlowKey,
    /// Per-flow packet sequence number.
    pub seq: u64,
    /// Payload bytes.
    pub len: u64,
    /// Last packet of its message.
    pub last: bool,
    /// The channel's negotiated inter-arrival time, known to both ends (VIA: set when the
    /// VI is created, Nagar §3.3); None for GM and best-effort channels.
    pub negotiated: Option<qos_core::units::Duration>,
}

/// What a packet carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Message data.
    Data(Data),
    /// A cumulative acknowledgement: per flow (in flow order), every sequence number
    /// below the one given has arrived.
    Ack(Vec<(FlowKey, u64)>),
}

/// A packet on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Source host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Bytes on the wire (payload + header).
    pub wire: u64,
    /// What it carries.
    pub body: Body,
}

impl Packet {
    /// Payload bytes (zero for an acknowledgement).
    #[inline]
    pub fn payload(&self) -> u64 {
        match &self.body {
            Body::Data(d) => d.len,
            Body::Ack(_) => 0,
        }
    }

    /// Whether the destination must stage it in a receive buffer before taking it off
    /// the network: data packets do; acknowledgements are consumed by the packet
    /// interface at once (assumption).
    #[inline]
    pub fn needs_receive_buffer(&self) -> bool {
        matches!(self.body, Body::Data(_))
    }
}

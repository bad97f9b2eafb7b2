//! Traffic sources of the papers' real-time experiments, shared by the flit network
//! (Yum et al. §6.2) and the VIA firmware model (Nagar et al. §4): MPEG video streams
//! (from trace files or a synthetic GOP generator), ON/OFF sources and Poisson sources;
//! the seven synthetic MPEG-2 stream classes standing in for Yum's traces ([`classes`]),
//! packetization, the token-bucket input regulator and periodic control traffic
//! ([`packets`]), and the real-time : best-effort mix ([`mix`]).
//! Every source is a deterministic function of its parameters and seed: an iterator of
//! [`Emission`]s (when, how many bytes) in time order. [`spec::Spec`] describes a source
//! in a few numbers (CBR, Poisson, an aggregate of MPEG streams) for the hosts of the
//! Myrinet model.

pub mod classes;
pub mod mix;
pub mod mpeg;
pub mod onoff;
pub mod packets;
pub mod spec;

use qos_core::units::{Bytes, Time};

/// One unit a source hands to the network: a video frame, a message, a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emission {
    /// When the source produces it.
    pub at: Time,
    /// Its size.
    pub size: Bytes,
    /// Index within the stream (frame number, message number).
    pub index: u64,
}

//! The calibrated constants of the Myrinet/GM model (thesis §4.1–4.2, §5.1–5.5), read
//! from the commented `calibration.toml` embedded in the binary. Each value's comment
//! there cites the thesis statement it is tuned against and every assumption made.
//! A scenario may override any value with a `[calibration]` table of the same shape.

use qos_core::source::{parse_toml, Located};
use qos_core::units::{Bandwidth, Bytes, Duration};
use serde::{Deserialize, Serialize};

/// The embedded calibration file.
pub const CALIBRATION_TOML: &str = include_str!("calibration.toml");

/// `[clock]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clock {
    /// LANai RTC tick.
    pub tick: Duration,
}

/// `[network]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Link bandwidth, each direction.
    pub link: Bandwidth,
    /// Cut-through latency of one switch.
    pub switch_latency: Duration,
    /// Wire overhead per packet.
    pub header: Bytes,
    /// Size of an acknowledgement packet.
    pub ack_size: Bytes,
}

/// `[packet]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Packet {
    /// Maximum transmission unit.
    pub mtu: Bytes,
}

/// `[pci]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pci {
    /// Host → NIC DMA rate.
    pub read: Bandwidth,
    /// NIC → host DMA rate.
    pub write: Bandwidth,
    /// Set-up time per DMA transfer.
    pub setup: Duration,
}

/// `[lanai]`: processor time of each MCP handler.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lanai {
    /// SDMA: prepare one outgoing packet.
    pub sdma_packet: Duration,
    /// SEND: inject one outgoing packet.
    pub send_packet: Duration,
    /// Per KiB of an outgoing packet.
    pub out_per_kib: Duration,
    /// SDMA: per send descriptor.
    pub sdma_message: Duration,
    /// Completion of a sent message.
    pub send_complete: Duration,
    /// Rate-control bookkeeping per dispatch.
    pub rate_control: Duration,
    /// RECV: one incoming packet.
    pub recv_packet: Duration,
    /// RDMA: deliver one incoming packet.
    pub rdma_packet: Duration,
    /// Per KiB of an incoming packet.
    pub in_per_kib: Duration,
    /// Build and send one acknowledgement.
    pub ack_send: Duration,
    /// Process one received acknowledgement.
    pub ack_recv: Duration,
    /// Delay before a cumulative acknowledgement goes out.
    pub ack_delay: Duration,
}

/// `[nic]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nic {
    /// SRAM send staging buffers.
    pub send_buffers: u32,
    /// SRAM receive staging buffers.
    pub receive_buffers: u32,
}

/// `[host]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Posting a descriptor.
    pub post: Duration,
    /// Noticing a completion.
    pub poll: Duration,
    /// Send tokens per port.
    pub send_tokens: u32,
}

/// `[mpi]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mpi {
    /// Fixed host cost per MPI message.
    pub per_message: Duration,
    /// Copy rate of the MPI layer on the sending host.
    pub copy_bandwidth: Bandwidth,
}

/// All calibrated constants.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// `[clock]`.
    pub clock: Clock,
    /// `[network]`.
    pub network: Network,
    /// `[packet]`.
    pub packet: Packet,
    /// `[pci]`.
    pub pci: Pci,
    /// `[lanai]`.
    pub lanai: Lanai,
    /// `[nic]`.
    pub nic: Nic,
    /// `[host]`.
    pub host: Host,
    /// `[mpi]`.
    pub mpi: Mpi,
}

impl Calibration {
    /// The embedded thesis calibration.
    pub fn thesis() -> Calibration {
        // The embedded file is checked by a test; failing here would be a build defect.
        Self::parse("calibration.toml", CALIBRATION_TOML)
            .unwrap_or_else(|e| panic!("embedded calibration is invalid: {e}"))
    }

    /// Parses and checks a calibration file.
    pub fn parse(file: &str, text: &str) -> Result<Calibration, Located> {
        let c: Calibration = parse_toml(file, text)?;
        c.check().map_err(|m| Located::whole(file, m))?;
        Ok(c)
    }

    /// Values that would make the model meaningless.
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("clock.tick", self.clock.tick.is_zero()),
            ("network.link", self.network.link.is_zero()),
            ("packet.mtu", self.packet.mtu.is_zero()),
            ("pci.read", self.pci.read.is_zero()),
            ("pci.write", self.pci.write.is_zero()),
            ("mpi.copy_bandwidth", self.mpi.copy_bandwidth.is_zero()),
            ("nic.send_buffers", self.nic.send_buffers == 0),
            ("nic.receive_buffers", self.nic.receive_buffers == 0),
            ("host.send_tokens", self.host.send_tokens == 0),
        ];
        for (name, bad) in positive {
            if bad {
                return Err(format!("calibration value {name} must be positive"));
            }
        }
        Ok(())
    }

    /// Processor time of one outgoing data packet of `len` bytes (SDMA + SEND handlers).
    pub fn out_packet_cost(&self, len: u64) -> (Duration, Duration) {
        let per = per_kib(self.lanai.out_per_kib, len);
        // Split the per-byte part evenly between the two handlers.
        (
            self.lanai.sdma_packet + per / 2,
            self.lanai.send_packet + (per - per / 2),
        )
    }

    /// Processor time of one incoming data packet of `len` bytes (RECV, RDMA handlers).
    pub fn in_packet_cost(&self, len: u64) -> (Duration, Duration) {
        let per = per_kib(self.lanai.in_per_kib, len);
        (
            self.lanai.recv_packet + per / 2,
            self.lanai.rdma_packet + (per - per / 2),
        )
    }
}

fn per_kib(cost: Duration, len: u64) -> Duration {
    Duration::from_ps((cost.as_ps() as u128 * len as u128 / 1024) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_calibration_parses_and_has_the_thesis_clock() {
        let c = Calibration::thesis();
        assert_eq!(c.clock.tick, Duration::from_ns(500));
        assert_eq!(c.packet.mtu, Bytes::kib(4));
        assert_eq!(c.network.link, Bandwidth::from_mb_per_sec(160.0));
    }

    #[test]
    fn incoming_packets_cost_less_processor_time_than_outgoing_ones() {
        let c = Calibration::thesis();
        let (a, b) = c.out_packet_cost(4096);
        let (x, y) = c.in_packet_cost(4096);
        assert!(x + y < a + b);
    }

    #[test]
    fn unknown_calibration_key_names_the_line() {
        let text = CALIBRATION_TOML.replace("[mpi]\n", "[mpi]\nwarp = 9\n");
        let e = Calibration::parse("c.toml", &text).unwrap_err();
        assert!(e.to_string().contains("warp"), "{e}");
        assert!(e.line.is_some());
    }
}

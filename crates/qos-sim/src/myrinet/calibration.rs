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
    /// How a message is cut into packets.
    #[serde(default)]
    pub segmentation: Segmentation,
}

/// How a message is cut into packets (thesis §5.2: "the original version of GM
/// attempts to segment multi-packet messages into equal sized chunks, we have disabled
/// that feature for our version").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Segmentation {
    /// Each MCP's own: equal chunks for unmodified GM, full-MTU packets for rate control.
    #[default]
    Firmware,
    /// `⌈len / mtu⌉` chunks whose sizes differ by at most one byte, larger ones first.
    EqualChunks,
    /// MTU-sized packets and a shorter last one.
    FullMtu,
}

impl Segmentation {
    /// The payload sizes of the packets of a message of `len` bytes (at least one
    /// packet, none larger than `mtu`), for a rule other than [`Segmentation::Firmware`]
    /// (which is resolved by the MCP).
    pub fn cut(self, len: u64, mtu: u64) -> Vec<u64> {
        let mtu = mtu.max(1);
        let n = len.div_ceil(mtu).max(1);
        match self {
            Segmentation::EqualChunks | Segmentation::Firmware => {
                let (base, extra) = (len / n, len % n);
                (0..n).map(|i| base + u64::from(i < extra)).collect()
            }
            Segmentation::FullMtu => (0..n)
                .map(|i| if i + 1 < n { mtu } else { len - mtu * (n - 1) })
                .collect(),
        }
    }
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
    fn equal_chunks_and_full_mtu_packets_carry_the_same_bytes_in_as_many_packets() {
        for len in [0u64, 1, 4095, 4096, 4097, 6144, 13_000, 65_536] {
            let e = Segmentation::EqualChunks.cut(len, 4096);
            let f = Segmentation::FullMtu.cut(len, 4096);
            assert_eq!(e.len(), f.len(), "{len}");
            assert_eq!(e.iter().sum::<u64>(), len);
            assert_eq!(f.iter().sum::<u64>(), len);
            assert!(e.iter().chain(&f).all(|&p| p <= 4096));
            assert!(e.iter().max().unwrap() - e.iter().min().unwrap() <= 1);
        }
        assert_eq!(Segmentation::EqualChunks.cut(6144, 4096), vec![3072, 3072]);
        assert_eq!(Segmentation::FullMtu.cut(6144, 4096), vec![4096, 2048]);
        assert_eq!(Segmentation::EqualChunks.cut(13_000, 4096), vec![3250; 4]);
    }

    #[test]
    fn unknown_calibration_key_names_the_line() {
        let text = CALIBRATION_TOML.replace("[mpi]\n", "[mpi]\nwarp = 9\n");
        let e = Calibration::parse("c.toml", &text).unwrap_err();
        assert!(e.to_string().contains("warp"), "{e}");
        assert!(e.line.is_some());
    }
}

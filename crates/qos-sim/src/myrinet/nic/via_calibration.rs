//! The constants of the VIA firmware model (Nagar et al. §2–4), read from the commented
//! `via/calibration.toml` beside this file (embedded in the binary): the host DMA engine,
//! the host's posting and polling, and the LANai's cost of each LCP operation for the
//! three control programs. Every value's comment says which Table 1 entries it is
//! fitted to, or what is assumed.

use qos_core::source::{parse_toml, Located};
use qos_core::units::{Bandwidth, Bytes, Duration};
use serde::{Deserialize, Serialize};

/// The embedded calibration file.
pub const VIA_CALIBRATION_TOML: &str = include_str!("via/calibration.toml");

/// `[hdma]`: the host DMA engine and the sizes it moves (§2.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HdmaCal {
    /// Host → NIC rate (descriptors and send data).
    pub read: Bandwidth,
    /// NIC → host rate (receive data and completion status).
    pub write: Bandwidth,
    /// Fixed time of each host → NIC request (one per page of a buffer).
    pub read_setup: Duration,
    /// Fixed time of each NIC → host request.
    pub write_setup: Duration,
    /// Size of a descriptor in host memory.
    pub descriptor: Bytes,
    /// Size of a completion status record.
    pub status: Bytes,
    /// Host page size: a buffer needs one DMA request per page it spans.
    pub page: Bytes,
    /// Where application buffers start within their first page.
    pub buffer_offset: Bytes,
}

/// `[host]`: the application side of a VIA channel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViaHost {
    /// Building a descriptor and ringing the doorbell.
    pub post: Duration,
    /// Noticing a completion in host memory.
    pub poll: Duration,
}

/// `[nic]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViaNic {
    /// Messages the NIC can hold off the network before the LCP takes them (NRDMA
    /// re-armed); the paper's simulator has infinite buffers.
    pub receive_buffers: u32,
}

/// The LANai's time for each LCP operation of one control program (§3). Costs not
/// used by a program are zero.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LcpCosts {
    /// Checking one device for an event (one step of the polling loop).
    pub poll: Duration,
    /// A send doorbell: read the channel state and program the descriptor DMA.
    pub doorbell: Duration,
    /// A descriptor is down: examine it and program the first page of the data DMA.
    pub data_prog: Duration,
    /// Each further page of a data DMA (host → NIC or NIC → host).
    pub per_page: Duration,
    /// The data is down: hand the message to NSDMA (start it, or queue it).
    pub nsdma_start: Duration,
    /// Program a completion status write.
    pub status_prog: Duration,
    /// A completion status write is done: retire the message.
    pub status_done: Duration,
    /// A message arrived: take it off NRDMA, match its channel's pre-posted receive
    /// descriptor and program the first page of the data DMA up (SVIA: program the
    /// fetch of the receive descriptor).
    pub recv: Duration,
    /// Between a message's arrival in the NIC and the start of the LCP's receive
    /// processing (time not spent by the LCP).
    pub rx_latency: Duration,
}

/// What QoSVIA adds to PVIA (§3.3: "the basic difference between PVIA and QoS VIA is
/// only in the time-stamping of events … and the possible insertions into the middle of
/// the HDMA/NSDMA queues").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosCosts {
    /// The VirtualClock update of a doorbell (`auxVC`).
    pub timestamp: Duration,
    /// Inserting a request into a timestamp-ordered queue (HDMA or NSDMA).
    pub insert: Duration,
    /// Per queued request passed while finding the insertion point.
    pub scan: Duration,
    /// Queued HDMA requests next to the head that an insertion never passes (the
    /// tolerated mis-ordering near the head, where the DMA engine works).
    pub guard: u32,
    /// The LCP takes finished host DMA requests in stamp order rather than in the order
    /// they finished (an assumption of this model: see `calibration.toml`).
    pub ordered_completions: bool,
}

/// All constants of the VIA model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViaCalibration {
    /// `[hdma]`.
    pub hdma: HdmaCal,
    /// `[host]`.
    pub host: ViaHost,
    /// `[nic]`.
    pub nic: ViaNic,
    /// `[svia]`: the sequential LCP (§3.1).
    pub svia: LcpCosts,
    /// `[pvia]`: the polling state machine (§3.2).
    pub pvia: LcpCosts,
    /// `[qosvia]`: what VirtualClock adds to PVIA's costs (§3.3).
    pub qosvia: QosCosts,
}

impl ViaCalibration {
    /// The embedded calibration (fitted to Nagar et al. Table 1).
    pub fn paper() -> ViaCalibration {
        // The embedded file is checked by a test; failing here would be a build defect.
        Self::parse("via-calibration.toml", VIA_CALIBRATION_TOML)
            .unwrap_or_else(|e| panic!("embedded VIA calibration is invalid: {e}"))
    }

    /// Parses and checks a calibration file.
    pub fn parse(file: &str, text: &str) -> Result<ViaCalibration, Located> {
        let c: ViaCalibration = parse_toml(file, text)?;
        c.check().map_err(|m| Located::whole(file, m))?;
        Ok(c)
    }

    /// Values that would make the model meaningless.
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("hdma.read", self.hdma.read.is_zero()),
            ("hdma.write", self.hdma.write.is_zero()),
            ("hdma.page", self.hdma.page.is_zero()),
            ("nic.receive_buffers", self.nic.receive_buffers == 0),
        ];
        for (name, bad) in positive {
            if bad {
                return Err(format!("VIA calibration value {name} must be positive"));
            }
        }
        if self.hdma.buffer_offset >= self.hdma.page {
            return Err("VIA calibration value hdma.buffer_offset must be below hdma.page".into());
        }
        Ok(())
    }

    /// Pages (DMA requests) a buffer of `bytes` spans, and the size of its last one.
    pub fn pages(&self, bytes: u64) -> (u32, u64) {
        let page = self.hdma.page.get();
        let start = self.hdma.buffer_offset.get();
        let end = start + bytes.max(1);
        let pages = (end - 1) / page - start / page + 1;
        let last = (end - ((end - 1) / page) * page).min(bytes.max(1));
        (pages as u32, last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_calibration_parses() {
        let c = ViaCalibration::paper();
        assert!(c.qosvia.insert > Duration::ZERO);
        assert!(c.pvia.doorbell > c.svia.doorbell);
    }

    #[test]
    fn buffers_span_the_pages_their_offset_puts_them_on() {
        let mut c = ViaCalibration::paper();
        c.hdma.page = Bytes::kib(4);
        c.hdma.buffer_offset = Bytes::new(64);
        assert_eq!(c.pages(4), (1, 4));
        assert_eq!(c.pages(1024), (1, 1024));
        // 64 .. 4160: two pages, the second holding 64 bytes.
        assert_eq!(c.pages(4096), (2, 64));
        // 64 .. 16448: five pages.
        assert_eq!(c.pages(16384), (5, 64));
        c.hdma.buffer_offset = Bytes::ZERO;
        assert_eq!(c.pages(4096), (1, 4096));
        assert_eq!(c.pages(0), (1, 1));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let text = VIA_CALIBRATION_TOML.replace("[pvia]\n", "[pvia]\nwarp = \"1us\"\n");
        let e = ViaCalibration::parse("v.toml", &text).unwrap_err();
        assert!(e.to_string().contains("warp"), "{e}");
        let text =
            VIA_CALIBRATION_TOML.replace("buffer_offset = \"64B\"", "buffer_offset = \"8KiB\"");
        assert!(ViaCalibration::parse("v.toml", &text).is_err());
    }
}

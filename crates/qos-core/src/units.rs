//! Typed physical units: [`Bandwidth`], [`Time`], [`Duration`], [`Bytes`].
//!
//! All are integers so that sums (admission ledgers) are exact and simulations are
//! bit-reproducible:
//! - [`Bandwidth`] counts bytes per second. As in the papers, `MB/s` means 10^6 bytes
//!   per second (papers/README: 4096 B every 250 µs = 16.38 MB/s).
//! - [`Time`] (an instant) and [`Duration`] (a span) count picoseconds: fine enough for
//!   flit cycles of a GHz router and for LANai ticks (0.5 µs), and a `u64` of them spans
//!   213 days.
//! - [`Bytes`] counts bytes. `KB`/`MB`/`GB` are decimal (10^3, 10^6, 10^9) and
//!   `KiB`/`MiB`/`GiB` binary, so "4KiB" is the papers' 4 KB MTU.
//!
//! Human forms parse with `FromStr` ("40MB/s", "1.28Gbit/s", "4KiB", "250us") and also
//! from TOML/JSON strings through serde; [`Duration::parse_with_tick`] also accepts
//! "96ticks" given the length of a tick. Printing uses the same forms.

use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Sub, SubAssign};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a quantity could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The text does not start with a number.
    #[error("invalid {kind} '{text}': expected a number followed by a unit such as {examples}")]
    NotANumber {
        kind: &'static str,
        text: String,
        examples: &'static str,
    },
    /// The unit is not one this quantity knows.
    #[error("invalid {kind} '{text}': unknown unit '{unit}' (expected one of {expected})")]
    UnknownUnit {
        kind: &'static str,
        text: String,
        unit: String,
        expected: &'static str,
    },
    /// Negative quantities are meaningless for these types.
    #[error("invalid {kind} '{text}': must not be negative")]
    Negative { kind: &'static str, text: String },
    /// The value does not fit (or would lose all precision).
    #[error("invalid {kind} '{text}': out of range")]
    OutOfRange { kind: &'static str, text: String },
    /// A tick count was given but no tick length is known here.
    #[error("invalid duration '{text}': 'ticks' needs a tick length (set tick = \"0.5us\")")]
    NoTickLength { text: String },
}

/// Splits "12.5 MB/s" into (12.5, "MB/s"); shared by every parser below.
fn split_number(
    text: &str,
    kind: &'static str,
    examples: &'static str,
) -> Result<(f64, String), UnitError> {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == '_'
                || (i == 0 && (c == '-' || c == '+'))
                || ((c == 'e' || c == 'E')
                    && i > 0
                    && !t[i + 1..].starts_with(|d: char| d.is_alphabetic())))
        })
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let num: String = t[..end].chars().filter(|&c| c != '_').collect();
    let value: f64 = num.parse().map_err(|_| UnitError::NotANumber {
        kind,
        text: text.to_string(),
        examples,
    })?;
    if !value.is_finite() {
        return Err(UnitError::OutOfRange {
            kind,
            text: text.to_string(),
        });
    }
    if value < 0.0 || t.starts_with('-') {
        return Err(UnitError::Negative {
            kind,
            text: text.to_string(),
        });
    }
    Ok((value, t[end..].trim().to_string()))
}

/// Converts `value * scale` to an integer, rounding to nearest, with range checking.
fn scaled(value: f64, scale: f64, kind: &'static str, text: &str) -> Result<u64, UnitError> {
    let v = (value * scale).round();
    if !(0.0..=(u64::MAX as f64)).contains(&v) {
        return Err(UnitError::OutOfRange {
            kind,
            text: text.to_string(),
        });
    }
    Ok(v as u64)
}

// ---------------------------------------------------------------------------------------
// Bandwidth
// ---------------------------------------------------------------------------------------

/// A data rate in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bandwidth(u64);

const BW_UNITS: &str =
    "B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s, bit/s, kbit/s, Mbit/s, Gbit/s, Mbps, Gbps";

impl Bandwidth {
    /// Zero bytes per second.
    pub const ZERO: Bandwidth = Bandwidth(0);

    /// From bytes per second.
    pub const fn from_bytes_per_sec(bps: u64) -> Self {
        Bandwidth(bps)
    }
    /// From the papers' MB/s (10^6 bytes per second); rounds to the nearest byte/s.
    pub fn from_mb_per_sec(mbps: f64) -> Self {
        Bandwidth((mbps * 1e6).round().max(0.0) as u64)
    }
    /// From bits per second (rounded down to whole bytes).
    pub const fn from_bits_per_sec(bits: u64) -> Self {
        Bandwidth(bits / 8)
    }
    /// Bytes per second.
    pub const fn bytes_per_sec(self) -> u64 {
        self.0
    }
    /// MB/s (10^6 bytes per second), as the papers print it.
    pub fn mb_per_sec(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Whether this is zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// `self - other`, or zero if `other` is larger.
    pub const fn saturating_sub(self, other: Bandwidth) -> Bandwidth {
        Bandwidth(self.0.saturating_sub(other.0))
    }
    /// `self + other`, `None` on overflow.
    pub fn checked_add(self, other: Bandwidth) -> Option<Bandwidth> {
        self.0.checked_add(other.0).map(Bandwidth)
    }
    /// Time to move `bytes` at this rate, rounded up to the next picosecond.
    /// `None` for a zero rate.
    pub fn transfer_time(self, bytes: Bytes) -> Option<Duration> {
        if self.0 == 0 {
            return None;
        }
        let ps = (bytes.0 as u128 * PS_PER_SEC as u128).div_ceil(self.0 as u128);
        Some(Duration(ps.min(u64::MAX as u128) as u64))
    }
    /// The rate that moves `bytes` every `per`. `None` for a zero duration.
    pub fn from_bytes_per(bytes: Bytes, per: Duration) -> Option<Bandwidth> {
        if per.0 == 0 {
            return None;
        }
        let bps = (bytes.0 as u128 * PS_PER_SEC as u128) / per.0 as u128;
        Some(Bandwidth(bps.min(u64::MAX as u128) as u64))
    }
}

impl FromStr for Bandwidth {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let (value, unit) = split_number(text, "bandwidth", "\"40MB/s\" or \"1.28Gbit/s\"")?;
        let u = unit.replace(' ', "");
        let scale = match u.as_str() {
            "B/s" | "Bps" => 1.0,
            "kB/s" | "KB/s" => 1e3,
            "MB/s" => 1e6,
            "GB/s" => 1e9,
            "KiB/s" => 1024.0,
            "MiB/s" => 1024.0 * 1024.0,
            "GiB/s" => 1024.0 * 1024.0 * 1024.0,
            "bit/s" | "b/s" | "bps" => 1.0 / 8.0,
            "kbit/s" | "kb/s" | "kbps" | "Kbit/s" | "Kbps" => 1e3 / 8.0,
            "Mbit/s" | "Mb/s" | "Mbps" => 1e6 / 8.0,
            "Gbit/s" | "Gb/s" | "Gbps" => 1e9 / 8.0,
            _ => {
                return Err(UnitError::UnknownUnit {
                    kind: "bandwidth",
                    text: text.to_string(),
                    unit,
                    expected: BW_UNITS,
                })
            }
        };
        Ok(Bandwidth(scaled(value, scale, "bandwidth", text)?))
    }
}

impl fmt::Display for Bandwidth {
    /// Prints MB/s with up to two decimals, as the papers do ("40.91MB/s"); rates below
    /// 0.01 MB/s print in B/s.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 != 0 && self.0 < 10_000 {
            return write!(f, "{}B/s", self.0);
        }
        let s = format!("{:.2}", self.mb_per_sec());
        let s = s.trim_end_matches('0').trim_end_matches('.');
        write!(f, "{s}MB/s")
    }
}

impl Add for Bandwidth {
    type Output = Bandwidth;
    fn add(self, o: Bandwidth) -> Bandwidth {
        Bandwidth(self.0 + o.0)
    }
}
impl AddAssign for Bandwidth {
    fn add_assign(&mut self, o: Bandwidth) {
        self.0 += o.0;
    }
}
impl Sub for Bandwidth {
    type Output = Bandwidth;
    fn sub(self, o: Bandwidth) -> Bandwidth {
        Bandwidth(self.0 - o.0)
    }
}
impl SubAssign for Bandwidth {
    fn sub_assign(&mut self, o: Bandwidth) {
        self.0 -= o.0;
    }
}
impl std::iter::Sum for Bandwidth {
    fn sum<I: Iterator<Item = Bandwidth>>(iter: I) -> Bandwidth {
        Bandwidth(iter.map(|b| b.0).sum())
    }
}

// ---------------------------------------------------------------------------------------
// Time and Duration
// ---------------------------------------------------------------------------------------

/// Picoseconds in one second.
pub const PS_PER_SEC: u64 = 1_000_000_000_000;

/// A span of time in picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

/// An instant, picoseconds since the start of a run (simulation) or of a clock epoch
/// chosen by the caller (runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

const DUR_UNITS: &str = "ps, ns, us (µs), ms, s, ticks";

impl Duration {
    /// No time.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable span.
    pub const MAX: Duration = Duration(u64::MAX);

    /// From picoseconds.
    pub const fn from_ps(ps: u64) -> Self {
        Duration(ps)
    }
    /// From nanoseconds.
    pub const fn from_ns(ns: u64) -> Self {
        Duration(ns * 1_000)
    }
    /// From microseconds.
    pub const fn from_us(us: u64) -> Self {
        Duration(us * 1_000_000)
    }
    /// From milliseconds.
    pub const fn from_ms(ms: u64) -> Self {
        Duration(ms * 1_000_000_000)
    }
    /// From seconds.
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * PS_PER_SEC)
    }
    /// From fractional seconds (rounded to the picosecond).
    pub fn from_secs_f64(s: f64) -> Self {
        Duration((s * PS_PER_SEC as f64).round().max(0.0) as u64)
    }
    /// Picoseconds.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// Nanoseconds (truncated).
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
    /// Fractional microseconds.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Fractional seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_SEC as f64
    }
    /// Whether this is zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// `self - other`, or zero.
    pub const fn saturating_sub(self, o: Duration) -> Duration {
        Duration(self.0.saturating_sub(o.0))
    }
    /// `self + other`, saturating at [`Duration::MAX`].
    pub const fn saturating_add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
    /// How many whole `tick`s fit in this span (`None` for a zero tick).
    pub fn in_ticks(self, tick: Duration) -> Option<u64> {
        (tick.0 != 0).then(|| self.0 / tick.0)
    }
    /// Fractional number of `tick`s in this span.
    pub fn in_ticks_f64(self, tick: Duration) -> f64 {
        self.0 as f64 / tick.0 as f64
    }
    /// Parses like `FromStr`, and also accepts "96ticks" (or "96 tick") given the tick
    /// length, e.g. the LANai 4.3 real-time clock's 0.5 µs.
    pub fn parse_with_tick(text: &str, tick: Option<Duration>) -> Result<Duration, UnitError> {
        let (value, unit) = split_number(text, "duration", "\"250us\" or \"96ticks\"")?;
        let scale = match unit.as_str() {
            "ps" => 1.0,
            "ns" => 1e3,
            "us" | "µs" | "μs" => 1e6,
            "ms" => 1e9,
            "s" | "sec" => 1e12,
            "tick" | "ticks" => match tick {
                Some(t) => t.0 as f64,
                None => {
                    return Err(UnitError::NoTickLength {
                        text: text.to_string(),
                    })
                }
            },
            _ => {
                return Err(UnitError::UnknownUnit {
                    kind: "duration",
                    text: text.to_string(),
                    unit,
                    expected: DUR_UNITS,
                })
            }
        };
        Ok(Duration(scaled(value, scale, "duration", text)?))
    }
}

impl FromStr for Duration {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        Duration::parse_with_tick(text, None)
    }
}

impl fmt::Display for Duration {
    /// Prints in the largest unit that keeps the value at least 1 ("250us", "1.5ms").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.0;
        let (div, unit) = if ps >= PS_PER_SEC {
            (1e12, "s")
        } else if ps >= 1_000_000_000 {
            (1e9, "ms")
        } else if ps >= 1_000_000 {
            (1e6, "us")
        } else if ps >= 1_000 {
            (1e3, "ns")
        } else {
            (1.0, "ps")
        };
        let s = format!("{:.3}", ps as f64 / div);
        let s = s.trim_end_matches('0').trim_end_matches('.');
        write!(f, "{s}{unit}")
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, o: Duration) -> Duration {
        Duration(self.0 + o.0)
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, o: Duration) {
        self.0 += o.0;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, o: Duration) -> Duration {
        Duration(self.0 - o.0)
    }
}
impl Mul<u64> for Duration {
    type Output = Duration;
    fn mul(self, k: u64) -> Duration {
        Duration(self.0 * k)
    }
}
impl Div<u64> for Duration {
    type Output = Duration;
    fn div(self, k: u64) -> Duration {
        Duration(self.0 / k)
    }
}
impl std::iter::Sum for Duration {
    fn sum<I: Iterator<Item = Duration>>(iter: I) -> Duration {
        Duration(iter.map(|d| d.0).sum())
    }
}

impl Time {
    /// The start of time.
    pub const ZERO: Time = Time(0);
    /// The end of time (used as "never").
    pub const NEVER: Time = Time(u64::MAX);

    /// From picoseconds since the epoch.
    pub const fn from_ps(ps: u64) -> Self {
        Time(ps)
    }
    /// Picoseconds since the epoch.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// The span since the epoch.
    pub const fn since_epoch(self) -> Duration {
        Duration(self.0)
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// `self + d`, saturating at [`Time::NEVER`].
    pub const fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}", Duration(self.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(self.0 + d.0)
    }
}
impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        self.0 += d.0;
    }
}
impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        Time(self.0 - d.0)
    }
}
impl Sub for Time {
    type Output = Duration;
    fn sub(self, o: Time) -> Duration {
        Duration(self.0 - o.0)
    }
}

// ---------------------------------------------------------------------------------------
// Bytes
// ---------------------------------------------------------------------------------------

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(u64);

const BYTE_UNITS: &str = "B, kB, KB, MB, GB, KiB, MiB, GiB";

impl Bytes {
    /// Zero bytes.
    pub const ZERO: Bytes = Bytes(0);
    /// From a byte count.
    pub const fn new(n: u64) -> Self {
        Bytes(n)
    }
    /// From KiB (1024 bytes).
    pub const fn kib(n: u64) -> Self {
        Bytes(n * 1024)
    }
    /// The byte count.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// Whether this is zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl FromStr for Bytes {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let (value, unit) = split_number(text, "size", "\"4KiB\" or \"64KiB\"")?;
        let scale = match unit.as_str() {
            "" | "B" | "byte" | "bytes" => 1.0,
            "kB" | "KB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => {
                return Err(UnitError::UnknownUnit {
                    kind: "size",
                    text: text.to_string(),
                    unit,
                    expected: BYTE_UNITS,
                })
            }
        };
        Ok(Bytes(scaled(value, scale, "size", text)?))
    }
}

impl fmt::Display for Bytes {
    /// Exact binary multiples print as KiB/MiB ("4KiB"), everything else in bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
            write!(f, "{}GiB", n >> 30)
        } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
            write!(f, "{}MiB", n >> 20)
        } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
            write!(f, "{}KiB", n >> 10)
        } else {
            write!(f, "{n}B")
        }
    }
}

impl Add for Bytes {
    type Output = Bytes;
    fn add(self, o: Bytes) -> Bytes {
        Bytes(self.0 + o.0)
    }
}
impl AddAssign for Bytes {
    fn add_assign(&mut self, o: Bytes) {
        self.0 += o.0;
    }
}
impl Sub for Bytes {
    type Output = Bytes;
    fn sub(self, o: Bytes) -> Bytes {
        Bytes(self.0 - o.0)
    }
}
impl std::iter::Sum for Bytes {
    fn sum<I: Iterator<Item = Bytes>>(iter: I) -> Bytes {
        Bytes(iter.map(|b| b.0).sum())
    }
}

// ---------------------------------------------------------------------------------------
// serde: human strings in, human strings out; bare integers mean the base unit.
// ---------------------------------------------------------------------------------------

macro_rules! serde_via_str {
    ($ty:ident, $what:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$ty, E> {
                        Ok($ty(v))
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$ty, E> {
                        u64::try_from(v)
                            .map($ty)
                            .map_err(|_| E::custom(concat!($what, " must not be negative")))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

serde_via_str!(Bandwidth, "a bandwidth such as \"40MB/s\"");
serde_via_str!(Duration, "a duration such as \"250us\"");
serde_via_str!(Bytes, "a size such as \"4KiB\"");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_uses_decimal_megabytes_like_the_papers() {
        assert_eq!(
            "40MB/s".parse::<Bandwidth>().unwrap().bytes_per_sec(),
            40_000_000
        );
        assert_eq!(
            "1.28Gbit/s".parse::<Bandwidth>().unwrap().bytes_per_sec(),
            160_000_000
        );
        assert_eq!(
            "1.28 Gb/s".parse::<Bandwidth>().unwrap().bytes_per_sec(),
            160_000_000
        );
        assert_eq!("2KiB/s".parse::<Bandwidth>().unwrap().bytes_per_sec(), 2048);
        // papers/README check: 4096 B every 250 µs = 16.38 MB/s
        let b = Bandwidth::from_bytes_per(Bytes::kib(4), Duration::from_us(250)).unwrap();
        assert_eq!(b.to_string(), "16.38MB/s");
    }

    #[test]
    fn bad_units_give_clear_errors() {
        let e = "40MBs".parse::<Bandwidth>().unwrap_err().to_string();
        assert!(e.contains("unknown unit 'MBs'"), "{e}");
        let e = "-5MB/s".parse::<Bandwidth>().unwrap_err().to_string();
        assert!(e.contains("negative"), "{e}");
        let e = "fast".parse::<Bandwidth>().unwrap_err().to_string();
        assert!(e.contains("expected a number"), "{e}");
        assert!("10 parsecs".parse::<Duration>().is_err());
        assert!("3 furlongs".parse::<Bytes>().is_err());
    }

    #[test]
    fn durations_parse_in_all_units_and_ticks() {
        assert_eq!("250us".parse::<Duration>().unwrap(), Duration::from_us(250));
        assert_eq!(
            "1.5ms".parse::<Duration>().unwrap(),
            Duration::from_us(1500)
        );
        assert_eq!("48 µs".parse::<Duration>().unwrap(), Duration::from_us(48));
        let tick = Duration::from_ns(500);
        assert_eq!(
            Duration::parse_with_tick("96ticks", Some(tick)).unwrap(),
            Duration::from_us(48)
        );
        assert!(matches!(
            "96ticks".parse::<Duration>(),
            Err(UnitError::NoTickLength { .. })
        ));
        assert_eq!(Duration::from_us(250).to_string(), "250us");
        assert_eq!(Duration::from_us(1500).to_string(), "1.5ms");
    }

    #[test]
    fn sizes_distinguish_binary_and_decimal() {
        assert_eq!("4KiB".parse::<Bytes>().unwrap().get(), 4096);
        assert_eq!("4KB".parse::<Bytes>().unwrap().get(), 4000);
        assert_eq!("64 KiB".parse::<Bytes>().unwrap().to_string(), "64KiB");
        assert_eq!("100".parse::<Bytes>().unwrap().get(), 100);
    }

    #[test]
    fn transfer_time_rounds_up() {
        let link = "1.28Gbit/s".parse::<Bandwidth>().unwrap();
        // 4096 B at 160 MB/s = 25.6 us
        assert_eq!(
            link.transfer_time(Bytes::kib(4)).unwrap(),
            Duration::from_ns(25_600)
        );
        assert_eq!(Bandwidth::ZERO.transfer_time(Bytes::new(1)), None);
    }

    #[test]
    fn serde_reads_strings_and_integers() {
        #[derive(Deserialize)]
        struct S {
            b: Bandwidth,
            d: Duration,
            n: Bytes,
        }
        let s: S = toml::from_str("b = \"40MB/s\"\nd = 7\nn = \"4KiB\"").unwrap();
        assert_eq!(s.b, Bandwidth::from_mb_per_sec(40.0));
        assert_eq!(s.d, Duration::from_ps(7));
        assert_eq!(s.n, Bytes::kib(4));
        let e = toml::from_str::<S>("b = \"40 furlongs\"\nd = 7\nn = 1")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
    }
}

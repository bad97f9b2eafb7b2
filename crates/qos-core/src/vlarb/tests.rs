//! Tests of VL arbitration: the worked examples of Yum et al. §3.3, WRR shares, the
//! pointer modes and the Limit of High Priority.

use super::iba::{limit_of_high_priority, Limit, TwoLevel};
use super::wrr::{self, Entry, Frame, Pointer, Wrr};
use super::*;

fn no_age(_: usize) -> u64 {
    0
}

/// Runs `n` flits through `a` with every lane in `eligible` always backlogged; returns
/// flits per lane.
fn saturate(a: &mut impl VlArbiter, eligible: VlMask, n: usize) -> [u64; MAX_VLS] {
    let mut count = [0u64; MAX_VLS];
    for _ in 0..n {
        let v = a.pick(eligible, no_age).expect("some lane");
        a.sent(v);
        count[v] += 1;
    }
    count
}

#[test]
fn weights_reproduce_paper_examples_of_section_3_3() {
    // R1 = 100, R2 = 200: F = 3 gives 1, 2; F = 300 gives 100, 200.
    assert_eq!(wrr::weights(&[100, 200], 3).unwrap(), vec![1, 2]);
    assert_eq!(wrr::weights(&[100, 200], 300).unwrap(), vec![100, 200]);
    // R1 = 101, R2 = 200 with F = 301: exact.
    assert_eq!(wrr::weights(&[101, 200], 301).unwrap(), vec![101, 200]);
    // Fixed small frame F = 6: both give 2, 4 (truncation error).
    assert_eq!(wrr::weights(&[100, 200], 6).unwrap(), vec![2, 4]);
    assert_eq!(wrr::weights(&[101, 200], 6).unwrap(), vec![2, 4]);
}

#[test]
fn small_frame_is_k_times_lanes_and_large_frame_is_255_by_64() {
    assert_eq!(Frame::Small { k: 4 }.flits(11), 44);
    assert_eq!(Frame::Large.flits(11), 16320);
}

#[test]
fn large_frame_table_splits_weights_over_255() {
    let t = wrr::table(&[0, 1], &[1, 3], Frame::Large).unwrap();
    let sum = |vl: u8| {
        t.iter()
            .filter(|e| e.vl == vl)
            .map(|e| e.weight as u32)
            .sum::<u32>()
    };
    assert_eq!(sum(0), 4080);
    assert_eq!(sum(1), 12240);
    assert!(t.iter().all(|e| e.weight as u32 <= wrr::MAX_WEIGHT));
    assert!(t.len() <= wrr::MAX_ENTRIES);
}

#[test]
fn weights_reject_empty_input() {
    assert_eq!(wrr::weights(&[0, 0], 6), Err(VlArbError::NoReservations));
    assert_eq!(wrr::weights(&[1], 0), Err(VlArbError::EmptyFrame));
}

#[test]
fn wrr_shares_match_weights_under_saturation_in_all_four_variants() {
    for frame in [Frame::Small { k: 4 }, Frame::Large] {
        for pointer in [Pointer::Fast, Pointer::Slow] {
            let t = wrr::table(&[0, 1, 2], &[100, 200, 300], frame).unwrap();
            let mut a = Wrr::new(t, pointer).unwrap();
            let n = 600_000;
            let c = saturate(&mut a, 0b111, n);
            for (v, want) in [(0, 1.0 / 6.0), (1, 2.0 / 6.0), (2, 3.0 / 6.0)] {
                let got = c[v] as f64 / n as f64;
                assert!(
                    (got - want).abs() < 0.02 * want,
                    "{frame:?} {pointer:?} vl{v}: {got}"
                );
            }
        }
    }
}

#[test]
fn fast_pointer_interleaves_and_slow_pointer_sends_weight_in_a_row() {
    let t = vec![Entry { vl: 0, weight: 3 }, Entry { vl: 1, weight: 2 }];
    let seq = |p| {
        let mut a = Wrr::new(t.clone(), p).unwrap();
        (0..5)
            .map(|_| {
                let v = a.pick(0b11, no_age).unwrap();
                a.sent(v);
                v
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(seq(Pointer::Fast), vec![0, 1, 0, 1, 0]);
    assert_eq!(seq(Pointer::Slow), vec![0, 0, 0, 1, 1]);
}

#[test]
fn wrr_is_work_conserving_when_lanes_go_idle() {
    let t = vec![Entry { vl: 0, weight: 1 }, Entry { vl: 1, weight: 9 }];
    let mut a = Wrr::new(t, Pointer::Fast).unwrap();
    let c = saturate(&mut a, 0b01, 100);
    assert_eq!(c[0], 100);
}

#[test]
fn lane_outside_every_table_is_not_served() {
    let mut a = Wrr::new(vec![Entry { vl: 0, weight: 1 }], Pointer::Fast).unwrap();
    assert_eq!(a.pick(0b10, no_age), None);
}

#[test]
fn table_checks_lanes_and_size() {
    assert_eq!(
        Wrr::new(vec![Entry { vl: 16, weight: 1 }], Pointer::Fast).unwrap_err(),
        VlArbError::LaneOutOfRange(16)
    );
    let big = vec![Entry { vl: 0, weight: 1 }; 65];
    assert_eq!(
        Wrr::new(big, Pointer::Fast).unwrap_err(),
        VlArbError::TableTooLarge(65)
    );
}

#[test]
fn limit_of_high_priority_is_b_over_b_minus_bp_exactly() {
    assert_eq!(limit_of_high_priority(100, 80).value(), 5.0);
    assert_eq!(limit_of_high_priority(100, 50).value(), 2.0);
    assert_eq!(limit_of_high_priority(100, 0).value(), 1.0);
    // Not rounded down: B_p = 0.3 B gives L = 1/0.7, not 1.
    assert!((limit_of_high_priority(100, 30).value() - 100.0 / 70.0).abs() < 1e-12);
    assert_eq!(limit_of_high_priority(100, 100).value(), 255.0);
    assert_eq!(limit_of_high_priority(100, 150).value(), 255.0);
    assert_eq!(limit_of_high_priority(1000, 999).value(), 1000.0);
}

/// High priority's share of the flits with both classes always backlogged.
fn high_share(limit: Limit, n: usize) -> f64 {
    let high = Wrr::new(vec![Entry { vl: 0, weight: 1 }], Pointer::Fast).unwrap();
    let low = Wrr::new(vec![Entry { vl: 1, weight: 1 }], Pointer::Fast).unwrap();
    let mut a = TwoLevel::with_limit(high, low, limit);
    let c = saturate(&mut a, 0b11, n);
    c[0] as f64 / n as f64
}

#[test]
fn high_priority_gets_exactly_its_peak_share_with_both_classes_backlogged() {
    // §3.3: B = B_p + B_b with B_b = B / L. Link B = 1.6 Gbit/s in bytes/s; the
    // paper's L = 255 for B_p ≥ B leaves best effort B/255.
    let b = 200_000_000u64;
    for ratio in [0.1, 0.3, 0.5, 0.7, 0.85, 1.0] {
        let bp = (b as f64 * ratio).round() as u64;
        let got = high_share(limit_of_high_priority(b, bp), 100_000);
        let want = if bp >= b { 254.0 / 255.0 } else { ratio };
        assert!(
            (got - want).abs() < 1e-4,
            "B_p/B = {ratio}: high share {got}, want {want}"
        );
        assert!(
            (got - ratio).abs() <= 0.01 * ratio,
            "B_p/B = {ratio}: high share {got} more than 1 % off"
        );
    }
}

#[test]
fn the_integer_limit_rounded_down_would_starve_high_priority() {
    // What IBA's integer field would give for B_p = 0.3 B: ⌊1/0.7⌋ = 1, every flit to
    // best effort while it waits — the exact limit above gives high priority 0.3.
    assert_eq!(high_share(Limit::from_iba(1), 1000), 0.0);
    assert!((high_share(limit_of_high_priority(10, 3), 1000) - 0.3).abs() < 1e-3);
}

#[test]
fn high_priority_limit_guarantees_low_priority_its_minimum_share() {
    // B_p = 80 % of the link: L = 5, so low priority keeps at least 1/5 of the link
    // even though high priority is always backlogged.
    let l = limit_of_high_priority(100, 80);
    let high = Wrr::new(vec![Entry { vl: 0, weight: 1 }], Pointer::Fast).unwrap();
    let low = Wrr::new(vec![Entry { vl: 1, weight: 1 }], Pointer::Fast).unwrap();
    let mut a = TwoLevel::with_limit(high, low, l);
    let n = 100_000;
    let c = saturate(&mut a, 0b11, n);
    let low_share = c[1] as f64 / n as f64;
    assert!(low_share >= 0.2 - 1e-9, "low share {low_share}");
    assert!((low_share - 0.2).abs() < 0.02 * 0.2);
}

#[test]
fn an_idle_low_priority_banks_no_credit() {
    // L = 2: after a long run of high priority alone, low priority arriving gets its
    // one flit in two, not a burst of what it would have earned.
    let high = Wrr::new(vec![Entry { vl: 0, weight: 1 }], Pointer::Fast).unwrap();
    let low = Wrr::new(vec![Entry { vl: 1, weight: 1 }], Pointer::Fast).unwrap();
    let mut a = TwoLevel::with_limit(high, low, limit_of_high_priority(100, 50));
    saturate(&mut a, 0b01, 1000);
    let seq: Vec<usize> = (0..6)
        .map(|_| {
            let v = a.pick(0b11, no_age).unwrap();
            a.sent(v);
            v
        })
        .collect();
    assert_eq!(seq, vec![0, 1, 0, 1, 0, 1]);
}

#[test]
fn unlimited_high_priority_starves_low_priority() {
    let high = Wrr::new(vec![Entry { vl: 0, weight: 1 }], Pointer::Fast).unwrap();
    let low = Wrr::new(vec![Entry { vl: 1, weight: 1 }], Pointer::Fast).unwrap();
    let mut a = TwoLevel::new(high, low, 255);
    let c = saturate(&mut a, 0b11, 1000);
    assert_eq!(c[1], 0);
}

#[test]
fn low_priority_gets_everything_when_high_is_idle() {
    let high = Wrr::new(vec![Entry { vl: 0, weight: 1 }], Pointer::Fast).unwrap();
    let low = Wrr::new(vec![Entry { vl: 1, weight: 1 }], Pointer::Fast).unwrap();
    let mut a = TwoLevel::new(high, low, 2);
    assert_eq!(saturate(&mut a, 0b10, 50)[1], 50);
}

#[test]
fn control_lane_always_wins() {
    for cfg in [
        VlArbConfig::Fcfs,
        VlArbConfig::RoundRobin,
        VlArbConfig::Wrr {
            table: vec![Entry { vl: 0, weight: 1 }],
            pointer: Pointer::Fast,
        },
    ] {
        let mut a = cfg.build().unwrap();
        let c = saturate(&mut a, 1 | 1 << CONTROL_VL, 10);
        assert_eq!(c[CONTROL_VL], 10);
    }
}

#[test]
fn fcfs_picks_oldest_head_flit() {
    let mut a = Fcfs;
    let ages = [30u64, 10, 20];
    assert_eq!(a.pick(0b111, |v| ages[v]), Some(1));
    assert_eq!(a.pick(0b101, |v| ages[v]), Some(2));
}

#[test]
fn round_robin_rotates_one_flit_per_lane() {
    let mut a = RoundRobin::default();
    let seq: Vec<_> = (0..6)
        .map(|_| {
            let v = a.pick(0b1011, no_age).unwrap();
            a.sent(v);
            v
        })
        .collect();
    assert_eq!(seq, vec![0, 1, 3, 0, 1, 3]);
}

#[test]
fn config_parses_from_toml() {
    #[derive(serde::Deserialize)]
    struct W {
        arb: VlArbConfig,
    }
    let w: W = toml::from_str(
        "[arb]\nkind = \"iba\"\nlimit = 5\npointer = \"slow\"\nhigh = [{ vl = 0, weight = 3 }]\nlow = [{ vl = 1, weight = 1 }]\n",
    )
    .unwrap();
    assert!(matches!(w.arb.build().unwrap(), AnyVlArbiter::Iba(_)));
}

/// The table walk [`Wrr`] replaced with masks: the pointer visits the entries one by
/// one, from itself, cyclically.
struct WalkedWrr {
    entries: Vec<Entry>,
    remaining: Vec<u32>,
    pointer: Pointer,
    ptr: usize,
    picked: usize,
}

impl WalkedWrr {
    fn scan(&self, eligible: VlMask) -> Option<usize> {
        let n = self.entries.len();
        (0..n)
            .map(|i| (self.ptr + i) % n)
            .find(|&e| self.remaining[e] > 0 && eligible & (1 << self.entries[e].vl) != 0)
    }

    fn pick(&mut self, eligible: VlMask) -> Option<usize> {
        let served = self
            .entries
            .iter()
            .filter(|e| e.weight > 0)
            .fold(0, |m, e| m | 1 << e.vl);
        if eligible & served == 0 {
            return None;
        }
        let e = match self.scan(eligible) {
            Some(e) => e,
            None => {
                for (r, e) in self.remaining.iter_mut().zip(&self.entries) {
                    let w = e.weight as u32;
                    *r = (*r + w).min(2 * w);
                }
                self.scan(eligible)?
            }
        };
        self.picked = e;
        Some(self.entries[e].vl as usize)
    }

    fn sent(&mut self, vl: usize) {
        let e = self.picked;
        if e >= self.entries.len() || self.entries[e].vl as usize != vl {
            return;
        }
        self.remaining[e] -= 1;
        let n = self.entries.len();
        self.ptr = match self.pointer {
            Pointer::Fast => (e + 1) % n,
            Pointer::Slow if self.remaining[e] > 0 => e,
            Pointer::Slow => (e + 1) % n,
        };
    }
}

proptest::proptest! {
    /// The masked search picks what walking the table picks, flit by flit: any table of
    /// up to 64 entries, either pointer, lanes turning eligible and ineligible, picks
    /// not followed by a send and sends of another lane.
    #[test]
    fn wrr_picks_as_walking_the_table(
        table in proptest::collection::vec((0u8..16, 0u8..4), 0..=64),
        slow in proptest::bool::ANY,
        steps in proptest::collection::vec((0u32..1 << 16, 0u8..8), 1..400),
    ) {
        let entries: Vec<Entry> = table.iter().map(|&(vl, weight)| Entry { vl, weight }).collect();
        let pointer = if slow { Pointer::Slow } else { Pointer::Fast };
        let mut fast = Wrr::new(entries.clone(), pointer).unwrap();
        let mut walked = WalkedWrr {
            remaining: entries.iter().map(|e| e.weight as u32).collect(),
            entries,
            pointer,
            ptr: 0,
            picked: usize::MAX,
        };
        for (eligible, action) in steps {
            let got = fast.pick(eligible, no_age);
            proptest::prop_assert_eq!(got, walked.pick(eligible));
            match (got, action) {
                // Most picks send their flit; some do not, some report another lane.
                (Some(v), 0..=5) => {
                    fast.sent(v);
                    walked.sent(v);
                }
                (Some(v), 6) => {
                    fast.sent((v + 1) % MAX_VLS);
                    walked.sent((v + 1) % MAX_VLS);
                }
                _ => {}
            }
        }
    }
}

/// `RoundRobin::first_from` (a rotation) against a plain scan of the lanes from `start`
/// round: every mask of the low 8 lanes and of lanes spread over all 32, every start.
#[test]
fn first_from_is_the_first_lane_at_or_after_start() {
    let scan = |m: VlMask, start: u32| {
        (0..32)
            .map(|i| (start % 32 + i) % 32)
            .find(|&l| m >> l & 1 != 0)
    };
    let masks =
        (0..256u32).chain((0..256u32).map(|x| x.wrapping_mul(0x0101_0101).rotate_left(x % 7)));
    for m in masks {
        for start in 0..70 {
            assert_eq!(
                RoundRobin::first_from(m, start),
                scan(m, start).map(|l| l as usize),
                "mask {m:#x} start {start}"
            );
        }
    }
}

/// The rotation against a plain scan from `start` round, for masks over all 64 bits
/// and every start a router's pointers take (0 to 64).
#[test]
fn first_set_from_is_the_first_bit_at_or_after_start() {
    let scan = |m: u64, start: u32| {
        let s = if start >= 64 { 0 } else { start };
        (0..64)
            .map(|i| (s + i) % 64)
            .find(|&b| m >> b & 1 != 0)
            .unwrap() as usize
    };
    for x in 1..2000u64 {
        let m = x
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(x as u32 % 61)
            | (x & 1) << 63;
        for start in 0..=64 {
            assert_eq!(
                first_set_from(m, start),
                scan(m, start),
                "mask {m:#x} start {start}"
            );
        }
    }
}

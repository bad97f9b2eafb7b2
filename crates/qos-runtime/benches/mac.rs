//! What authenticating a datagram costs per byte on this machine's CPU, for the
//! data plane's choice of MAC (docs/dataplane.md, "What authentication costs"): the
//! candidates over a 65,400-byte payload (the largest datagram), each with the payload
//! hot in this core's cache and freshly written by another core (the sending agent
//! reads what the application wrote into shared memory from another core), and the
//! plain read of such a payload for comparison:
//!
//! - AES-128-GCM with the payload as associated data (GMAC, what the data plane's
//!   `authenticated` protection does), and encrypting a copy (the stitched AES-GCM
//!   path, `encrypted`), from AWS-LC;
//! - ChaCha20-Poly1305 with the payload as associated data (Poly1305) and encrypting
//!   in place, from AWS-LC;
//! - BLAKE3 keyed hashing (the `blake3` crate).
//!
//! Run: `cargo bench -p qos-runtime --bench mac [-- ITERATIONS]` (20,000 by default).
//! The candidates run interleaved: five rounds, each timing every candidate in turn
//! (ITERATIONS / 5 hot passes, a quarter of that cold), so a change of the machine's
//! speed during the run reaches them all alike. Prints, per candidate and case, the
//! median over the rounds in ns per payload, GB/s and cycles per byte at the clock
//! /proc/cpuinfo reports, and the rounds' range.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, CHACHA20_POLY1305};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const N: usize = 65_400;

fn nonce(i: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&i.to_le_bytes());
    Nonce::assume_unique_for_key(n)
}

type F = Box<dyn FnMut(&mut [u8], u64) -> u8>;

fn cands() -> Vec<(&'static str, F)> {
    let gcm = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7u8; 16]).unwrap());
    let gcm2 = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7u8; 16]).unwrap());
    let cp = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &[7u8; 32]).unwrap());
    let cp2 = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &[7u8; 32]).unwrap());
    let bk = [9u8; 32];
    let mut scratch = vec![0u8; N];
    vec![
        (
            "aws-lc GMAC (AES-128-GCM, payload as AAD)",
            Box::new(move |b: &mut [u8], i| {
                let t = gcm
                    .seal_in_place_separate_tag(nonce(i), Aad::from(&*b), &mut [])
                    .unwrap();
                t.as_ref()[0]
            }) as F,
        ),
        (
            "aws-lc AES-128-GCM encrypt (copy out, stitched)",
            Box::new(move |b: &mut [u8], i| {
                scratch.copy_from_slice(b);
                let t = gcm2
                    .seal_in_place_separate_tag(nonce(i), Aad::empty(), &mut scratch)
                    .unwrap();
                t.as_ref()[0]
            }),
        ),
        (
            "aws-lc Poly1305 (ChaCha20-Poly1305, payload as AAD)",
            Box::new(move |b: &mut [u8], i| {
                let t = cp
                    .seal_in_place_separate_tag(nonce(i), Aad::from(&*b), &mut [])
                    .unwrap();
                t.as_ref()[0]
            }),
        ),
        (
            "aws-lc ChaCha20-Poly1305 encrypt in place",
            Box::new(move |b: &mut [u8], i| {
                let t = cp2
                    .seal_in_place_separate_tag(nonce(i), Aad::empty(), b)
                    .unwrap();
                t.as_ref()[0]
            }),
        ),
        (
            "blake3 keyed hash",
            Box::new(move |b: &mut [u8], _| blake3::keyed_hash(&bk, b).as_bytes()[0]),
        ),
        (
            "read only (xor of u64 words)",
            Box::new(move |b: &mut [u8], _| {
                let x = b
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                    .fold(0u64, |a, x| a ^ x);
                x as u8
            }),
        ),
    ]
}

/// Rounds of the interleaved measurement.
const ROUNDS: usize = 5;

/// Mean ns per payload of `passes` calls of `f` on one buffer, hot in this core's cache.
fn hot(f: &mut F, passes: u64, first: u64, sink: &mut u8) -> f64 {
    let mut buf = vec![0x5au8; N];
    for i in 0..200 {
        *sink ^= f(&mut buf, i);
    }
    let t = Instant::now();
    for i in 0..passes {
        *sink ^= f(&mut buf, first + i);
    }
    t.elapsed().as_nanos() as f64 / passes as f64
}

/// Mean ns per payload of `passes` calls of `f`, each on a buffer another thread (the
/// other core) has just written.
fn cold(f: &mut F, passes: u64, first: u64, sink: &mut u8) -> f64 {
    let buf = Arc::new(std::sync::Mutex::new(vec![0u8; N]));
    let turn = Arc::new(AtomicU64::new(0));
    let (b2, t2) = (buf.clone(), turn.clone());
    let writer = std::thread::spawn(move || {
        for r in 0..passes {
            while t2.load(Ordering::Acquire) != 2 * r {
                std::hint::spin_loop();
            }
            b2.lock().unwrap().fill(r as u8);
            t2.store(2 * r + 1, Ordering::Release);
        }
    });
    let mut total = 0u128;
    for r in 0..passes {
        while turn.load(Ordering::Acquire) != 2 * r + 1 {
            std::hint::spin_loop();
        }
        let mut g = buf.lock().unwrap();
        let t = Instant::now();
        *sink ^= f(&mut g, first + r);
        total += t.elapsed().as_nanos();
        drop(g);
        turn.store(2 * r + 2, Ordering::Release);
    }
    writer.join().unwrap();
    total as f64 / passes as f64
}

fn main() {
    // `cargo bench` passes `--bench`; a number among the arguments is the iterations.
    let iters: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20000);
    let mhz: f64 = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    println!("payload {N} B, {iters} iterations in {ROUNDS} interleaved rounds, cpu MHz {mhz}");
    let mut cands = cands();
    let hot_passes = (iters / ROUNDS as u64).max(1);
    let cold_passes = (hot_passes / 4).max(1);
    // [candidate][round] = (hot ns, cold ns)
    let mut ns = vec![Vec::new(); cands.len()];
    let mut sink = 0u8;
    for r in 0..ROUNDS as u64 {
        for (c, (_, f)) in cands.iter_mut().enumerate() {
            let first = 1000 + r * hot_passes;
            let h = hot(f, hot_passes, first, &mut sink);
            let k = cold(f, cold_passes, first, &mut sink);
            ns[c].push((h, k));
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    for (case, pick) in [("hot ", 0usize), ("cold", 1)] {
        for ((name, _), rounds) in cands.iter().zip(&ns) {
            let (m, lo, hi) = median(
                rounds
                    .iter()
                    .map(|p| if pick == 0 { p.0 } else { p.1 })
                    .collect(),
            );
            println!(
                "{case}  {name:55} {m:7.0} ns/64KiB {:6.2} GB/s {:5.3} cycles/B  (rounds {lo:.0}-{hi:.0})",
                N as f64 / m,
                m * mhz / 1000.0 / N as f64
            );
        }
    }
    println!("({sink})");
}

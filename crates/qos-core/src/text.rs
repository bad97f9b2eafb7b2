//! Wording shared by every printed line: a count with its noun in the right number
//! ("1 miss", "2 misses", "1 worker"), so no output says "1 misses".

/// `n` followed by `noun` (given in the singular), pluralised when `n` is not 1 by the
/// regular English rules: `-s`, `-es` after s/x/z/ch/sh, `-ies` after a consonant and y.
pub fn count<N: std::fmt::Display + PartialEq + From<u8>>(n: N, noun: &str) -> String {
    if n == N::from(1) {
        format!("1 {noun}")
    } else {
        format!("{n} {}", plural(noun))
    }
}

/// The regular English plural of `noun`.
pub fn plural(noun: &str) -> String {
    let ends = |s: &str| noun.ends_with(s);
    if ends("s") || ends("x") || ends("z") || ends("ch") || ends("sh") {
        format!("{noun}es")
    } else if let Some(stem) = noun.strip_suffix('y').filter(|stem| {
        stem.chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphabetic() && !"aeiouAEIOU".contains(c))
    }) {
        format!("{stem}ies")
    } else {
        format!("{noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1u32, "miss"), "1 miss");
        assert_eq!(count(0u32, "miss"), "0 misses");
        assert_eq!(count(2u32, "miss"), "2 misses");
        assert_eq!(count(1u64, "worker"), "1 worker");
        assert_eq!(count(8usize, "worker"), "8 workers");
        assert_eq!(count(3u32, "process"), "3 processes");
        assert_eq!(count(2u32, "fit"), "2 fits");
        assert_eq!(count(2u32, "latency"), "2 latencies");
        assert_eq!(count(2u32, "day"), "2 days");
        assert_eq!(count(2u32, "IDT"), "2 IDTs");
    }
}

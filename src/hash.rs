//! The crate's one non-cryptographic hash, 64-bit FNV-1a: digests that ranks compare (split
//! lists, tensor shapes) and the derivation of child communicator ids. Not meant to resist an
//! adversary; ranks of one job trust each other's inputs.

/// The FNV-1a offset basis: the state to start a hash from.
pub(crate) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// Continues the FNV-1a hash `h` over `data` (start from [`FNV_OFFSET`]).
pub(crate) fn fnv1a(h: u64, data: &[u8]) -> u64 {
    data.iter().fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
}

/// FNV-1a of a sequence of words, each hashed as its 8 little-endian bytes.
pub(crate) fn fnv1a_words(words: impl IntoIterator<Item = u64>) -> u64 {
    words.into_iter().fold(FNV_OFFSET, |h, w| fnv1a(h, &w.to_le_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn words_are_order_sensitive() {
        assert_eq!(fnv1a_words([1, 2]), fnv1a(FNV_OFFSET, &[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]));
        assert_ne!(fnv1a_words([1, 2]), fnv1a_words([2, 1]));
        assert_ne!(fnv1a_words([]), fnv1a_words([0]));
    }
}

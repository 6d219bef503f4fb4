//! Cache hints, in one place for every layer that asks for them (the device's kernels and the
//! transport's exchange slots): a prefetch only asks the CPU to bring a line closer. It reads
//! nothing into a register, writes no memory and cannot fault, so a wrong address costs time
//! at worst. Where the CPU has no such hint (or under Miri, which runs neither the intrinsic
//! nor the inline assembly), nothing happens.

/// Asks for the cache line holding `at`, to be read soon.
#[inline]
pub(crate) fn prefetch_read<T>(at: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch is a hint (see the module docs); SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    let _ = at;
}

/// Asks for the cache line holding `at` with intent to write (`PREFETCHW`): owned, so that a
/// store to it later need not wait for other cores to give it up.
#[inline]
pub(crate) fn prefetch_write<T>(at: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if has_prefetchw() {
        // SAFETY: a prefetch is a hint (see the module docs); the CPU executes it (checked
        // above).
        unsafe {
            std::arch::asm!("prefetchw [{0}]", in(reg) at, options(nostack, preserves_flags, readonly));
        }
    }
    let _ = at;
}

/// Whether this CPU executes `PREFETCHW` (CPUID 8000_0001h, ECX bit 8), asked once.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    static HAS: AtomicU8 = AtomicU8::new(0); // 0: not asked yet, 1: no, 2: yes
    match HAS.load(Ordering::Relaxed) {
        0 => {
            // Leaf 8000_0000h says whether the extended leaf exists before it is asked.
            let has = std::arch::x86_64::__cpuid(0x8000_0000).eax >= 0x8000_0001
                && std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0;
            HAS.store(if has { 2 } else { 1 }, Ordering::Relaxed);
            has
        }
        v => v == 2,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hints_change_nothing() {
        let words = [1u64, 2, 3];
        for w in &words {
            super::prefetch_read(w);
            super::prefetch_write(w);
        }
        // Any address: a hint never faults.
        super::prefetch_read(std::ptr::null::<u8>());
        super::prefetch_write(std::ptr::null::<u8>());
        assert_eq!(words, [1, 2, 3]);
    }
}

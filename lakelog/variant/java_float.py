"""Java 17's ``Double.toString`` / ``Float.toString`` (the FloatingDecimal algorithm), which Spark's
``to_json`` uses for Variant doubles and floats on the JVMs Spark 4 runs on (17 and 21 differ: JDK 19
switched to shortest digits; this follows 17, which the test Spark uses).

The digits are not always the shortest round-tripping ones (``4.9E-324``, ``2.0E-3`` style cases), so
they are computed as FloatingDecimal.BinaryToASCIIBuffer.dtoa does, including its fixed-width
integer arithmetic in the int and long fast paths.
"""

from __future__ import annotations

import math
import struct

_N_5_BITS = [0, 3, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28, 31, 33, 35, 38, 40, 42, 45, 47, 49, 52, 54, 56, 59, 61]
_INSIGNIFICANT_POW2 = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9,
                       9, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15, 15, 16,
                       16, 16, 17, 17, 17, 18, 18, 18, 19]
_SIGNIF_MASK = (1 << 52) - 1
_EXP_ONE = 1023 << 52


def _wrap(x: int, bits: int) -> int:
    """x as a Java int (bits=32) or long (bits=64) after overflow."""
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def _estimate_dec_exp(fract_bits: int, bin_exp: int) -> int:
    d2 = struct.unpack("<d", struct.pack("<Q", _EXP_ONE | (fract_bits & _SIGNIF_MASK)))[0]
    d = (d2 - 1.5) * 0.289529654 + 0.176091259 + float(bin_exp) * 0.301029995663981
    return math.floor(d)


def _long_digits(lvalue: int, insignificant: int) -> tuple[list[int], int]:
    dec_exp = 0
    if insignificant:
        pow10 = 10**insignificant
        residue = lvalue % pow10
        lvalue //= pow10
        dec_exp += insignificant
        if residue >= pow10 >> 1:
            lvalue += 1
    text = str(lvalue)
    return [int(ch) for ch in text.rstrip("0")], dec_exp + len(text)


def _dtoa(bin_exp: int, fract_bits: int, n_sig: int) -> tuple[list[int], int]:
    """(digits, decimal exponent) with value = 0.digits x 10^exponent, as FloatingDecimal.dtoa."""
    tail = (fract_bits & -fract_bits).bit_length() - 1
    n_fract = 53 - tail
    n_tiny = max(0, n_fract - bin_exp - 1)
    if -21 <= bin_exp <= 62 and n_tiny < 27 and n_fract + _N_5_BITS[n_tiny] < 64 and n_tiny == 0:
        insignificant = 0
        if bin_exp > n_sig:
            p2 = bin_exp - n_sig - 1
            insignificant = _INSIGNIFICANT_POW2[p2] if 1 < p2 < len(_INSIGNIFICANT_POW2) else 0
        fb = fract_bits << (bin_exp - 52) if bin_exp >= 52 else fract_bits >> (52 - bin_exp)
        return _long_digits(fb, insignificant)
    dec_exp = _estimate_dec_exp(fract_bits, bin_exp)
    b5 = max(0, -dec_exp)
    b2 = b5 + n_tiny + bin_exp
    s5 = max(0, dec_exp)
    s2 = s5 + n_tiny
    m5, m2 = b5, b2 - n_sig
    fract_bits >>= tail
    b2 -= n_fract - 1
    common = min(b2, s2)
    b2, s2, m2 = b2 - common, s2 - common, m2 - common
    if n_fract == 1:
        m2 -= 1
    if m2 < 0:
        b2, s2, m2 = b2 - m2, s2 - m2, 0
    b_bits = n_fract + b2 + (_N_5_BITS[b5] if b5 < len(_N_5_BITS) else b5 * 3)
    ten_s_bits = s2 + 1 + (_N_5_BITS[s5 + 1] if s5 + 1 < len(_N_5_BITS) else (s5 + 1) * 3)
    digits: list[int] = []
    if b_bits < 64 and ten_s_bits < 64:
        bits = 32 if b_bits < 32 and ten_s_bits < 32 else 64
        b = _wrap(_wrap(fract_bits * 5**b5, bits) << b2, bits)
        s = _wrap(5**s5 << s2, bits)
        m = _wrap(5**m5 << m2, bits)
        tens = _wrap(s * 10, bits)
        q, b, m = b // s, _wrap(10 * (b % s), bits), _wrap(m * 10, bits)
        low, high = b < m, _wrap(b + m, bits) > tens
        if q == 0 and not high:
            dec_exp -= 1
        else:
            digits.append(q)
        if dec_exp < -3 or dec_exp >= 8:
            low = high = False
        while not low and not high:
            q, b, m = b // s, _wrap(10 * (b % s), bits), _wrap(m * 10, bits)
            if m > 0:
                low, high = b < m, _wrap(b + m, bits) > tens
            else:  # m overflowed: Java treats it as past both bounds
                low = high = True
            digits.append(q)
        low_diff = _wrap(_wrap(b << 1, bits) - tens, bits)
    else:
        s = 5**s5 << s2
        b = fract_bits * 5**b5 << b2
        m = 5**(m5 + 1) << (m2 + 1)
        ten_s = 5**(s5 + 1) << (s2 + 1)
        q, b = divmod(b, s)
        b *= 10
        low, high = b < m, b + m >= ten_s
        if q == 0 and not high:
            dec_exp -= 1
        else:
            digits.append(q)
        if dec_exp < -3 or dec_exp >= 8:
            low = high = False
        while not low and not high:
            q, b = divmod(b, s)
            b *= 10
            m *= 10
            low, high = b < m, b + m >= ten_s
            digits.append(q)
        low_diff = ((2 * b > ten_s) - (2 * b < ten_s)) if high and low else 0
    exp10 = dec_exp + 1
    if high and (not low or low_diff > 0 or (low_diff == 0 and digits[-1] & 1)):
        i = len(digits) - 1
        while digits[i] == 9 and i > 0:
            digits[i] = 0
            i -= 1
        if digits[i] == 9:  # carry out of the first digit
            exp10 += 1
            digits[0] = 1
        else:
            digits[i] += 1
    return digits, exp10


def _layout(negative: bool, digits: list[int], exp10: int) -> str:
    sign = "-" if negative else ""
    d = "".join(map(str, digits))
    if 0 < exp10 < 8:
        return f"{sign}{d[:exp10].ljust(exp10, '0')}.{d[exp10:] or '0'}"
    if -3 < exp10 <= 0:
        return f"{sign}0.{'0' * -exp10}{d}"
    return f"{sign}{d[0]}.{d[1:] or '0'}E{exp10 - 1}"


def double_to_string(x: float) -> str:
    """Java 17 ``Double.toString(x)``."""
    return _to_string(x, "<Q", "<d", 64, 52, 1023, 0)


def float_to_string(x: float) -> str:
    """Java 17 ``Float.toString((float) x)``."""
    return _to_string(x, "<I", "<f", 32, 23, 127, 29)


def _to_string(x: float, int_fmt: str, float_fmt: str, width: int, mantissa: int, bias: int, align: int) -> str:
    """The shared body of Java's ``Double``/``Float.toString``: ``width`` bits with a ``mantissa``-bit
    fraction and exponent ``bias``; ``align`` shifts a float's significand to a double's position."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    bits = struct.unpack(int_fmt, struct.pack(float_fmt, x))[0]
    negative = bool(bits >> (width - 1))
    fract = bits & ((1 << mantissa) - 1)
    exp_bits = width - 1 - mantissa
    bin_exp = (bits >> mantissa) & ((1 << exp_bits) - 1)
    if bin_exp == 0:
        if fract == 0:
            return "-0.0" if negative else "0.0"
        leading = width - fract.bit_length()
        shift = leading - exp_bits
        fract <<= shift
        bin_exp = 1 - shift
        n_sig = width - leading
    else:
        fract |= 1 << mantissa
        n_sig = mantissa + 1
    return _layout(negative, *_dtoa(bin_exp - bias, fract << align, n_sig))

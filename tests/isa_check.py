"""Which x86-64 instruction-set extensions above x86-64-v3 an ELF file's machine code uses,
function by function (capstone for decoding, pyelftools for the symbols).

x86-64-v3 (the psABI level: SSE up to 4.2, POPCNT, AVX, AVX2, BMI1/2, F16C, FMA, LZCNT, MOVBE)
is what the service checks a CPU for before it starts the embedded PostgreSQL, so anything
above it has to sit behind a runtime CPU check. Only the extensions that can fault on a v3 CPU
are reported; HLE prefixes and ENDBR64 are no-ops there and are not.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import capstone
from capstone import x86_const as x86
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

AVX512 = "AVX-512"
UNDECODABLE = "undecodable"

# Capstone 5 tags only some instructions with groups (no group at all on EVEX vpternlogq,
# vpopcntq, vpdpbusd or on VEX vfmadd231ps), so the groups are one source among four: the
# encoding, the registers and the mnemonic cover what the groups miss.
_GROUPS = {
    x86.X86_GRP_AVX512: AVX512,
    x86.X86_GRP_CDI: AVX512,
    x86.X86_GRP_ERI: AVX512,
    x86.X86_GRP_PFI: AVX512,
    x86.X86_GRP_DQI: AVX512,
    x86.X86_GRP_BWI: AVX512,
    x86.X86_GRP_VLX: AVX512,
    # Not in any psABI level, so not promised by the v3 check either, although Haswell has them.
    x86.X86_GRP_AES: "AES",
    x86.X86_GRP_PCLMUL: "PCLMUL",
    x86.X86_GRP_SHA: "SHA",
    x86.X86_GRP_ADX: "ADX",
    x86.X86_GRP_RTM: "RTM",
    x86.X86_GRP_SSE4A: "SSE4A",
    x86.X86_GRP_FMA4: "FMA4",
    x86.X86_GRP_XOP: "XOP",
    x86.X86_GRP_TBM: "TBM",
    x86.X86_GRP_3DNOW: "3DNow!",
    x86.X86_GRP_SGX: "SGX",
}

# Mnemonic prefixes of extensions that capstone 5 decodes without a group, or not at all (AMX,
# AVX-VNNI, AVX-IFMA: those come out as undecodable bytes, which are reported too).
_MNEMONICS = (
    ("gf2p8", "GFNI"),
    ("vgf2p8", "GFNI"),
    ("aes", "AES"),
    ("vaes", "AES"),
    ("pclmul", "PCLMUL"),
    ("vpclmul", "PCLMUL"),
    ("sha", "SHA"),
    ("xtest", "RTM"),
    ("rdrand", "RDRAND"),
    ("rdseed", "RDSEED"),
    ("ldtilecfg", "AMX"),
    ("sttilecfg", "AMX"),
    ("tile", "AMX"),
    ("tdp", "AMX"),
)
# AVX-VNNI and AVX-IFMA are the VEX forms of these; their EVEX forms are AVX-512.
_VEX_ONLY_ABOVE_V3 = {
    "vpdpbusd": "AVX-VNNI",
    "vpdpbusds": "AVX-VNNI",
    "vpdpwssd": "AVX-VNNI",
    "vpdpwssds": "AVX-VNNI",
    "vpmadd52luq": "AVX-IFMA",
    "vpmadd52huq": "AVX-IFMA",
}
# A 256- or 512-bit AES or carry-less multiply is VAES / VPCLMULQDQ, not AES-NI / PCLMULQDQ.
_WIDE = {"AES": "VAES", "PCLMUL": "VPCLMULQDQ"}

# zmm, the opmask registers and the upper 16 vector registers exist only with AVX-512 (EVEX);
# tmm only with AMX.
_AVX512_REGISTER = re.compile(r"\b(?:zmm\d+|[xy]mm(?:1[6-9]|2\d|3[01])|k[0-7])\b")
_AMX_REGISTER = re.compile(r"\btmm[0-7]\b")

_LEGACY_PREFIXES = frozenset(b"\x26\x2e\x36\x3e\x64\x65\x66\x67\xf0\xf2\xf3")
_NUMBERS = b"0123456789abcdef"
_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym
_STT_FUNC = 2
_STT_GNU_IFUNC = 10


@dataclass(frozen=True)
class Function:
    path: Path
    names: tuple[str, ...]
    address: int
    size: int
    extensions: frozenset[str]

    @property
    def name(self) -> str:
        return "/".join(self.names)

    def __str__(self) -> str:
        extensions = ", ".join(sorted(self.extensions))
        return f"{self.path.name}: {self.name} @{self.address:#x} ({extensions})"


def _encoding(code: bytes, offset: int, size: int) -> str:
    """legacy, vex, evex or xop, from the byte after the legacy prefixes. In 64-bit mode 0x62,
    0xc4 and 0xc5 there are always EVEX/VEX (BOUND, LES and LDS are gone), and 0x8f is XOP
    only when the next byte's map field is 8 or more (POP r/m has ModRM.reg 0). A REX prefix
    before any of them is #UD, so a REX byte means legacy."""
    end = offset + size
    while offset < end and code[offset] in _LEGACY_PREFIXES:
        offset += 1
    if offset >= end:
        return "legacy"
    byte = code[offset]
    if byte == 0x62:
        return "evex"
    if byte in (0xC4, 0xC5):
        return "vex"
    if byte == 0x8F and offset + 1 < end and code[offset + 1] & 0x1F >= 8:
        return "xop"
    return "legacy"


class Scanner:
    def __init__(self) -> None:
        self._lite = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        # Decoding goes on after bytes capstone does not know, which are reported as such: a
        # newer extension than capstone's tables must not end a function's scan silently.
        self._lite.skipdata = True
        self._detail = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        self._detail.detail = True
        # Detail mode costs ~10x, so groups are decoded once per (mnemonic, encoding, operand
        # shape). The shape is the operand text without digits and a-f: it keeps the vector
        # register classes and widths (xmm/ymm/zmm, "ymmword ptr", k) and drops immediates,
        # displacements, branch targets and register numbers, none of which changes what an
        # instruction needs. Checked against a decode of every instruction in detail mode.
        self._groups: dict[tuple[str, str, bytes], frozenset[str]] = {}

    def extensions(self, code: bytes, address: int) -> frozenset[str]:
        """The extensions above x86-64-v3 that the instructions in code use."""
        found: set[str] = set()
        for insn_address, size, mnemonic, op_str in self._lite.disasm_lite(code, address):
            if mnemonic == ".byte":
                found.add(UNDECODABLE)
                continue
            offset = insn_address - address
            encoding = _encoding(code, offset, size)
            if encoding == "evex":
                found.add(AVX512)
            elif encoding == "xop":
                found.add("XOP")
            if "mm" in op_str or "k" in op_str:
                if _AVX512_REGISTER.search(op_str):
                    found.add(AVX512)
                if _AMX_REGISTER.search(op_str):
                    found.add("AMX")
            key = (mnemonic, encoding, op_str.encode().translate(None, _NUMBERS))
            groups = self._groups.get(key)
            if groups is None:
                groups = self._classify(code[offset : offset + size], insn_address, key)
                self._groups[key] = groups
            found.update(groups)
        return frozenset(found)

    def _classify(self, raw: bytes, address: int, key: tuple[str, str, bytes]) -> frozenset[str]:
        mnemonic, encoding, shape = key
        insn = next(self._detail.disasm(raw, address, 1))
        found = {_GROUPS[group] for group in insn.groups if group in _GROUPS}
        for prefix, extension in _MNEMONICS:
            if mnemonic.startswith(prefix):
                found.add(extension)
        if encoding == "vex" and mnemonic in _VEX_ONLY_ABOVE_V3:
            found.add(_VEX_ONLY_ABOVE_V3[mnemonic])
        if b"ymm" in shape or b"zmm" in shape:
            found = {_WIDE.get(extension, extension) for extension in found}
        return frozenset(found)


def functions(path: Path, scanner: Scanner | None = None) -> list[Function]:
    """Every function of the ELF file at path with the extensions above x86-64-v3 it uses.

    Functions are the sized STT_FUNC (and IFUNC resolver) symbols of .symtab and .dynsym in
    executable sections, aliases merged. Executable bytes no sized symbol covers (PLT, _init,
    hand-written assembly without .size, a stripped library) are scanned as well, named after
    their section and offset, so that no code escapes for want of a symbol."""
    scanner = scanner or Scanner()
    with path.open("rb") as file:
        elf = ELFFile(file)
        if elf["e_machine"] != "EM_X86_64" or elf.elfclass != 64 or not elf.little_endian:
            raise ValueError(f"{path} is {elf['e_machine']}, not x86-64")
        sections = [
            (index, section)
            for index, section in enumerate(elf.iter_sections())
            if section["sh_flags"] & SH_FLAGS.SHF_EXECINSTR and section["sh_type"] != "SHT_NOBITS"
        ]
        code = {index: (section, section.data()) for index, section in sections}
        names: dict[tuple[int, int, int], list[str]] = {}
        for table in elf.iter_sections():
            if isinstance(table, SymbolTableSection):
                strings = elf.get_section(table["sh_link"]).data()
                _collect(table.data(), strings, code, names)

    result = []
    covered: dict[int, bytearray] = {
        index: bytearray(len(data)) for index, (_, data) in code.items()
    }
    for (index, address, size), aliases in sorted(names.items()):
        section, data = code[index]
        start = address - section["sh_addr"]
        body = data[start : start + size]
        covered[index][start : start + len(body)] = b"\x01" * len(body)
        result.append(
            Function(path, tuple(aliases), address, size, scanner.extensions(body, address))
        )
    for index, (section, data) in code.items():
        for start, end in _gaps(covered[index]):
            address = section["sh_addr"] + start
            name = f"<{section.name}+{start:#x}>"
            extensions = scanner.extensions(data[start:end], address)
            result.append(Function(path, (name,), address, end - start, extensions))
    return result


def _collect(
    table: bytes,
    strings: bytes,
    code: dict[int, object],
    names: dict[tuple[int, int, int], list[str]],
) -> None:
    # struct instead of pyelftools' symbol objects, which take seconds over postgres's 45,000.
    for name, info, _, index, value, size in _SYMBOL.iter_unpack(table):
        if info & 0xF not in (_STT_FUNC, _STT_GNU_IFUNC) or index not in code or size == 0:
            continue
        aliases = names.setdefault((index, value, size), [])
        alias = strings[name : strings.index(b"\0", name)].decode("utf-8", "replace")
        if alias not in aliases:
            aliases.append(alias)


def _gaps(covered: bytearray) -> Iterator[tuple[int, int]]:
    start = covered.find(0)
    while start != -1:
        end = covered.find(1, start)
        if end == -1:
            end = len(covered)
        yield start, end
        start = covered.find(0, end)


def code_of(function: Function) -> bytes:
    """The machine code of function, as scanned."""
    with function.path.open("rb") as file:
        for section in ELFFile(file).iter_sections():
            start = section["sh_addr"]
            if section["sh_flags"] & SH_FLAGS.SHF_EXECINSTR and start <= function.address:
                offset = function.address - start
                if offset + function.size <= section["sh_size"]:
                    return section.data()[offset : offset + function.size]
    raise ValueError(f"{function} is in no executable section of {function.path}")

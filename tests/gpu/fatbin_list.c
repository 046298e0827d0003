/*
 * fatbin_list.c - lists the GPU code inside an ELF file (an object, libccl.so,
 * a program): one line per kernel and architecture, e.g.
 *
 *   sm_80 elf dev_k_reduce_sum_f32
 *   compute_90 ptx dev_k_reduce_sum_f32
 *
 * nvcc puts the device code of each .cu file in the .nv_fatbin section as a
 * fat binary: a header (magic 0xba55ed50) and entries, each an ELF cubin
 * for one sm_XX or PTX text for one compute_XX. A cubin names each kernel
 * in a section ".text.<kernel>"; PTX declares it with ".entry <kernel>(".
 * cuobjdump --list-elf / --list-ptx says the same, but is not installed
 * everywhere nvcc is; tests/gpu/check_fatbin.sh uses this instead to fail a
 * build whose library misses a kernel for an architecture.
 *
 * The layout below is what nvcc 11 to 13 write; a compressed entry (nvcc
 * compresses unless told -no-compress) is reported and is an error, since
 * its kernels cannot be listed.
 *
 *   fatbin_list FILE    exit 0 and the list, or 1 and the reason
 */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_FLAG_COMPRESSED 0x2000ull

/* Header of one fat binary. */
typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t header_size;
    uint64_t fat_size; /* bytes of entries after the header */
} fatbin_header_t;

/* Header of one entry; the payload follows at header_size. */
typedef struct {
    uint16_t kind;
    uint16_t unknown1;
    uint32_t header_size;
    uint64_t payload_size;
    uint32_t compressed_size;
    uint32_t unknown2;
    uint16_t minor;
    uint16_t major;
    uint32_t arch;
    uint32_t name_offset;
    uint32_t name_size;
    uint64_t flags;
} fatbin_entry_t;

static int fail(const char *fmt, const char *a)
{
    fprintf(stderr, "fatbin_list: ");
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    return 1;
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) &&
            fread(buf, 1, (size_t)n, f) == (size_t)n)
            *len = (size_t)n;
        else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* The section `want` of a 64-bit little-endian ELF image; NULL if absent. */
static const unsigned char *elf_section(const unsigned char *img, size_t len, const char *want, size_t *size)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shoff == 0 || eh->e_shstrndx >= eh->e_shnum ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len)
        return NULL;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    const Elf64_Shdr *strs = &sh[eh->e_shstrndx];
    if (strs->sh_offset + strs->sh_size > len)
        return NULL;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_name >= strs->sh_size || sh[i].sh_type == SHT_NOBITS)
            continue;
        const char *name = (const char *)img + strs->sh_offset + sh[i].sh_name;
        if (strcmp(name, want) == 0 && sh[i].sh_offset + sh[i].sh_size <= len) {
            *size = sh[i].sh_size;
            return img + sh[i].sh_offset;
        }
    }
    return NULL;
}

/* Kernels of a cubin: its ".text.<name>" sections. */
static int list_cubin(const unsigned char *img, size_t len, unsigned arch)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len || eh->e_shstrndx >= eh->e_shnum)
        return fail("%s", "an sm entry is not a 64-bit ELF cubin");
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    const Elf64_Shdr *strs = &sh[eh->e_shstrndx];
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_name >= strs->sh_size)
            continue;
        const char *name = (const char *)img + strs->sh_offset + sh[i].sh_name;
        if (strncmp(name, ".text.", 6) == 0)
            printf("sm_%u elf %s\n", arch, name + 6);
    }
    return 0;
}

/* Kernels of PTX text: ".entry <name>(" (".visible .entry" in practice). */
static void list_ptx(const unsigned char *txt, size_t len, unsigned arch)
{
    const char *p = (const char *)txt, *end = p + len;
    static const char key[] = ".entry ";
    for (; p + sizeof key < (const char *)end; p++) {
        if (memcmp(p, key, sizeof key - 1) != 0)
            continue;
        const char *n = p + sizeof key - 1, *e = n;
        while (e < end && *e != '(' && *e != ' ' && *e != '\n')
            e++;
        printf("compute_%u ptx %.*s\n", arch, (int)(e - n), n);
        p = e;
    }
}

int main(int argc, char **argv)
{
    size_t len = 0, size = 0;
    if (argc != 2) {
        fprintf(stderr, "usage: %s ELF-FILE\n", argv[0]);
        return 2;
    }
    unsigned char *img = read_file(argv[1], &len);
    if (!img)
        return fail("cannot read %s", argv[1]);
    const unsigned char *sec = elf_section(img, len, ".nv_fatbin", &size);
    if (!sec)
        return fail("%s has no .nv_fatbin section (no GPU code)", argv[1]);
    int rc = 0, nfat = 0;
    size_t off = 0;
    /* Fat binaries follow each other, each padded to 8 bytes (zeros). */
    while (off + sizeof(fatbin_header_t) <= size && rc == 0) {
        fatbin_header_t fh;
        memcpy(&fh, sec + off, sizeof fh);
        if (fh.magic != FATBIN_MAGIC) {
            off += 8;
            continue;
        }
        nfat++;
        size_t e = off + fh.header_size, stop = off + fh.header_size + fh.fat_size;
        if (stop > size)
            return fail("%s", "a fat binary runs past its section");
        while (e + sizeof(fatbin_entry_t) <= stop) {
            fatbin_entry_t en;
            memcpy(&en, sec + e, sizeof en);
            if (en.header_size < sizeof en || e + en.header_size + en.payload_size > stop)
                return fail("%s", "a fat binary entry runs past its fat binary");
            const unsigned char *payload = sec + e + en.header_size;
            if (en.flags & FATBIN_FLAG_COMPRESSED) {
                fprintf(stderr, "fatbin_list: compressed %s entry for arch %u: build with nvcc -no-compress\n",
                        en.kind == FATBIN_KIND_PTX ? "PTX" : "ELF", en.arch);
                rc = 1;
            } else if (en.kind == FATBIN_KIND_ELF) {
                rc |= list_cubin(payload, en.payload_size, en.arch);
            } else if (en.kind == FATBIN_KIND_PTX) {
                list_ptx(payload, en.payload_size, en.arch);
            }
            e += en.header_size + en.payload_size;
        }
        off = (stop + 7) & ~(size_t)7;
    }
    free(img);
    if (nfat == 0)
        return fail("%s", "no fat binary in .nv_fatbin");
    return rc;
}

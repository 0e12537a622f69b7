/*
 * jitelf.c — see jitelf.h.
 */
#include "jitelf.h"

#include <stdlib.h>
#include <string.h>

static int in_image(const struct jitelf *e, uint64_t off, uint64_t len)
{
	return off <= e->n && len <= e->n - off;
}

int jitelf_open(struct jitelf *e, const void *image, size_t n)
{
	memset(e, 0, sizeof(*e));
	const uint8_t *p = image;
	if (!p || n < sizeof(Elf64_Ehdr) || memcmp(p, ELFMAG, SELFMAG) || p[EI_CLASS] != ELFCLASS64 ||
	    p[EI_DATA] != ELFDATA2LSB)
		return -1;
	e->p = p;
	e->n = n;
	e->eh = (const Elf64_Ehdr *)p;
	if (e->eh->e_shentsize != sizeof(Elf64_Shdr) || !e->eh->e_shnum ||
	    !in_image(e, e->eh->e_shoff, (uint64_t)e->eh->e_shnum * sizeof(Elf64_Shdr)) || (e->eh->e_shoff & 7) ||
	    ((uintptr_t)p & 7))
		return -1;
	e->sh = (const Elf64_Shdr *)(p + e->eh->e_shoff);
	e->shnum = e->eh->e_shnum;
	return 0;
}

static const Elf64_Shdr *shdr(const struct jitelf *e, uint32_t i)
{
	return i < e->shnum ? &e->sh[i] : NULL;
}

static int contents(const struct jitelf *e, const Elf64_Shdr *s, const uint8_t **data, size_t *len)
{
	if (!s || s->sh_type == SHT_NOBITS || !in_image(e, s->sh_offset, s->sh_size))
		return -1;
	*data = e->p + s->sh_offset;
	*len = (size_t)s->sh_size;
	return 0;
}

static const char *sect_name(const struct jitelf *e, const Elf64_Shdr *s)
{
	const uint8_t *str;
	size_t slen;
	if (contents(e, shdr(e, e->eh->e_shstrndx), &str, &slen) || s->sh_name >= slen ||
	    !memchr(str + s->sh_name, 0, slen - s->sh_name))
		return NULL;
	return (const char *)str + s->sh_name;
}

int jitelf_section(const struct jitelf *e, const char *name, const uint8_t **data, size_t *len, uint32_t *index)
{
	for (uint32_t i = 1; i < e->shnum; i++) {
		const char *n = sect_name(e, &e->sh[i]);
		if (n && !strcmp(n, name) && contents(e, &e->sh[i], data, len) == 0) {
			if (index)
				*index = i;
			return 0;
		}
	}
	return -1;
}

/* A symbol's run-time value: in a relocatable image, relative to its
 * section, which the JIT placed at sh_addr. */
static int sym_value(const struct jitelf *e, const Elf64_Sym *s, uint64_t *v)
{
	if (s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_COMMON)
		return -1;
	if (s->st_shndx == SHN_ABS || e->eh->e_type != ET_REL) {
		*v = s->st_value;
		return 0;
	}
	const Elf64_Shdr *sec = shdr(e, s->st_shndx);
	if (!sec)
		return -1;
	*v = sec->sh_addr + s->st_value;
	return 0;
}

static int symtab(const struct jitelf *e, const Elf64_Sym **syms, size_t *nsyms, const char **str, size_t *slen)
{
	for (uint32_t i = 1; i < e->shnum; i++) {
		const Elf64_Shdr *s = &e->sh[i];
		if (s->sh_type != SHT_SYMTAB || s->sh_entsize != sizeof(Elf64_Sym))
			continue;
		const uint8_t *d, *sd;
		size_t n;
		if (contents(e, s, &d, &n) || ((uintptr_t)d & 7) || contents(e, shdr(e, s->sh_link), &sd, slen))
			return -1;
		*syms = (const Elf64_Sym *)d;
		*nsyms = n / sizeof(Elf64_Sym);
		*str = (const char *)sd;
		return 0;
	}
	return -1;
}

long jitelf_functions(const struct jitelf *e, jitelf_func_fn fn, void *ctx)
{
	const Elf64_Sym *syms;
	size_t nsyms, slen;
	const char *str;
	if (symtab(e, &syms, &nsyms, &str, &slen))
		return -1;
	long calls = 0;
	for (size_t i = 1; i < nsyms; i++) {
		const Elf64_Sym *s = &syms[i];
		uint64_t v;
		if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || !s->st_size || s->st_name >= slen ||
		    !memchr(str + s->st_name, 0, slen - s->st_name) || sym_value(e, s, &v))
			continue;
		calls++;
		if (fn(ctx, str + s->st_name, v, s->st_size))
			break;
	}
	return calls;
}

uint8_t *jitelf_relocated(const struct jitelf *e, const char *name, size_t *len)
{
	const uint8_t *d;
	uint32_t idx;
	if (jitelf_section(e, name, &d, len, &idx))
		return NULL;
	uint8_t *out = malloc(*len ? *len : 1);
	if (!out)
		return NULL;
	memcpy(out, d, *len);
	const Elf64_Sym *syms = NULL;
	size_t nsyms = 0, slen;
	const char *str;
	int have_syms = symtab(e, &syms, &nsyms, &str, &slen) == 0;
	for (uint32_t i = 1; i < e->shnum; i++) {
		const Elf64_Shdr *r = &e->sh[i];
		if (r->sh_type != SHT_RELA || r->sh_info != idx || r->sh_entsize != sizeof(Elf64_Rela))
			continue;
		const uint8_t *rd;
		size_t rn;
		if (contents(e, r, &rd, &rn) || ((uintptr_t)rd & 7) || !have_syms)
			goto bad;
		const Elf64_Rela *ra = (const Elf64_Rela *)rd;
		for (size_t k = 0; k < rn / sizeof(Elf64_Rela); k++) {
			uint64_t si = ELF64_R_SYM(ra[k].r_info), type = ELF64_R_TYPE(ra[k].r_info), v = 0;
			if (si >= nsyms)
				goto bad;
			if (si && sym_value(e, &syms[si], &v))
				v = 0; /* undefined: resolves to 0 */
			v += (uint64_t)ra[k].r_addend;
			uint64_t off = ra[k].r_offset;
			unsigned sz = type == R_X86_64_64 ? 8 : (type == R_X86_64_32 || type == R_X86_64_32S) ? 4 : 0;
			if (!sz)
				continue; /* not an absolute relocation: nothing a line table uses */
			if (off > *len || *len - off < sz)
				goto bad;
			for (unsigned b = 0; b < sz; b++)
				out[off + b] = (uint8_t)(v >> (8 * b));
		}
	}
	return out;
bad:
	free(out);
	return NULL;
}

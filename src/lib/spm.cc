/*
 * spm: the C shim over libsentencepiece (spm.h). C++ because the library
 * has only a C++ API; nothing of the library leaks through spm.h, and no
 * exception crosses it.
 */
#include "spm.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

extern "C" {
#include "hash64.h"
}

struct ovl_spm {
	sentencepiece::SentencePieceProcessor sp;
	std::vector<int> ids;
	char name[48];
};

static struct ovl_spm *
spm_open(const char *path, char *err, size_t errlen)
{
	try {
		std::ifstream in(path, std::ios::binary);
		if (!in) {
			std::snprintf(err, errlen, "%s: %s", path, std::strerror(errno));
			return nullptr;
		}
		std::string data((std::istreambuf_iterator<char>(in)),
		    std::istreambuf_iterator<char>());
		/* owned here until returned: freed when the loader throws */
		std::unique_ptr<ovl_spm> s(new ovl_spm);
		auto st = s->sp.LoadFromSerializedProto(data);
		if (!st.ok()) {
			std::snprintf(err, errlen, "%s: not a SentencePiece model "
			    "(%s)", path, st.ToString().c_str());
			return nullptr;
		}
		std::snprintf(s->name, sizeof(s->name), "sentencepiece:%016" PRIx64,
		    ovl_hash64(data.data(), data.size(), 0));
		return s.release();
	} catch (const std::exception &e) {
		std::snprintf(err, errlen, "%s: %s", path, e.what());
		return nullptr;
	}
}

static void
spm_free(struct ovl_spm *s)
{
	delete s;
}

static const char *
spm_name(const struct ovl_spm *s)
{
	return s->name;
}

static uint32_t
spm_vocab(const struct ovl_spm *s)
{
	return (uint32_t)s->sp.GetPieceSize();
}

static int64_t
spm_eos(const struct ovl_spm *s)
{
	return s->sp.eos_id();
}

static int64_t
spm_piece_id(const struct ovl_spm *s, const char *piece)
{
	int id = s->sp.PieceToId(piece);

	/* an unknown piece maps to the unknown id */
	if (id < 0 || (s->sp.IsUnknown(id) && s->sp.IdToPiece(id) != piece))
		return -1;
	return id;
}

static int
spm_encode(struct ovl_spm *s, const char *text, size_t n,
    uint32_t **out_ids, size_t *len, size_t *cap, char *err, size_t errlen)
{
	try {
		auto st = s->sp.Encode(std::string_view(text, n), &s->ids);
		if (!st.ok()) {
			std::snprintf(err, errlen, "%s", st.ToString().c_str());
			return -1;
		}
		if (*len + s->ids.size() > *cap) {
			size_t c = (*len + s->ids.size()) * 2 + 64;
			uint32_t *p = (uint32_t *)std::realloc(*out_ids,
			    c * sizeof(uint32_t));
			if (p == nullptr)
				throw std::bad_alloc();
			*out_ids = p;
			*cap = c;
		}
		for (size_t i = 0; i < s->ids.size(); i++)
			(*out_ids)[*len + i] = (uint32_t)s->ids[i];
		*len += s->ids.size();
		return 0;
	} catch (const std::exception &e) {
		std::snprintf(err, errlen, "%s", e.what());
		return -1;
	}
}

static char *
spm_decode(const struct ovl_spm *s, const uint32_t *ids, size_t n,
    size_t *outlen)
{
	try {
		std::vector<int> v(ids, ids + n);
		std::string out;
		for (size_t i = 0; i < n; i++)
			if (ids[i] >= (uint32_t)s->sp.GetPieceSize())
				return nullptr;
		if (!s->sp.Decode(v, &out).ok())
			return nullptr;
		char *r = (char *)std::malloc(out.size() + 1);
		if (r == nullptr)
			return nullptr;
		std::memcpy(r, out.data(), out.size());
		r[out.size()] = '\0';
		*outlen = out.size();
		return r;
	} catch (const std::exception &) {
		return nullptr;
	}
}

/* The one name the shim exports (spm.h). */
extern "C" __attribute__((visibility("default")))
const struct ovl_spm_api ovl_spm_api = {
	OVL_SPM_ABI, spm_open, spm_free, spm_name, spm_vocab, spm_eos,
	spm_piece_id, spm_encode, spm_decode
};

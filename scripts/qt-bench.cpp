// qt-bench: quicktok (github.com/dmatth1/quicktok, built by scripts/bench-hf;
// never a dependency of overlord) on NUL-separated documents, timed and
// hashed as tests/unit/t-bpe bench does: CPU seconds of the encode calls
// only, one document a call, the token count and an FNV-1a hash of every id.
//
//   qt-bench DATA_DIR ENCODING FILE
//   -> quicktok bytes B tokens T seconds S hash H
#include "quicktok.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

static double
cpu_now()
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	if (argc != 4) {
		std::fprintf(stderr, "usage: qt-bench DATA_DIR ENCODING FILE\n");
		return 2;
	}
	auto tok = quicktok::Tokenizer::load_dir(argv[1], argv[2]);
	std::FILE *f = std::fopen(argv[3], "rb");
	if (f == nullptr) {
		std::perror(argv[3]);
		return 2;
	}
	std::vector<uint8_t> text;
	uint8_t buf[1 << 16];
	size_t got;
	while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
		text.insert(text.end(), buf, buf + got);
	std::fclose(f);

	std::vector<uint32_t> out;
	size_t toks = 0, pos = 0, n = text.size();
	uint32_t h = 2166136261u;
	double sec = 0;
	for (;;) {
		const uint8_t *doc = text.data() + pos;
		const void *z = std::memchr(doc, 0, n - pos);
		size_t len = z != nullptr ? (size_t)((const uint8_t *)z - doc) :
		    n - pos;
		out.clear();
		double t0 = cpu_now();
		tok.encode(doc, len, out);
		sec += cpu_now() - t0;
		toks += out.size();
		for (uint32_t id : out)
			h = (h ^ id) * 16777619u;
		if (z == nullptr)
			break;
		pos += len + 1;
	}
	std::printf("quicktok bytes %zu tokens %zu seconds %.3f hash %x\n", n,
	    toks, sec, h);
	return 0;
}

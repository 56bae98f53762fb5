/* gradcheck._scan: the hot path of reading event files, in C.
 *
 * A Scanner walks a buffer of TFRecords: framing, both masked CRC32C checks, and a minimal
 * protobuf decode of exactly the Event fields gradcheck reads. It writes one row per histogram
 * or scalar value into caller-provided column buffers (numpy arrays), so Python handles whole
 * batches with numpy instead of one object per record. It also places values (index among the
 * values of a tag at one step, restarts, Keras 3 collisions) with the same rules as
 * gradcheck/reader.py, which stays the reference.
 *
 * Anything unusual is not decoded here: the scan stops and reports why (damage, a record it does
 * not fully understand, the end of the buffer), and Python's reference code handles that record
 * with the same state. Every read is bounds-checked against the buffer, whatever the bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* CRC32C: SSE4.2 instruction (three streams with PCLMUL), slicing-by-8 tables otherwise        */
/* ------------------------------------------------------------------------------------------ */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC_X86 1
#include <immintrin.h>
#endif

/* Why three streams: the crc32 instruction takes 3 cycles but the CPU can start one every cycle,
 * so one chain of dependent crc32s runs at a third of the CPU's speed. crc_hw3 cuts a buffer into
 * rounds of three blocks of L bytes, A B C, and runs their three chains in one loop.
 * How they are combined: CRC32C is linear over GF(2). The register after A B C (before the final
 * inversion) is A's register shifted over 2L zero bytes, xor B's shifted over L zero bytes, xor
 * C's, when B's and C's chains start from 0. Shifting a register r over L zero bytes multiplies
 * it by x^(8L) mod P. A carry-less multiply (PCLMUL) of r by the constant x^(8L-33) mod P gives a
 * 64-bit product that the crc32 instruction reduces mod P (crc32 multiplies by x^32, and the
 * bit-reflected product carries one more x): both products are xored into the last word of C
 * before its crc32, so the reduction is free. shift_const[i] = x^(64i-33) mod P is the constant
 * for 8i bytes, i = 1 .. 2 * CRC_BLOCK / 8.
 * Buffers shorter than CRC_THREE_STREAMS bytes keep one chain: cutting them costs more than it
 * saves (bench/crc_speed.py; the figures are in bench/README.md).
 * CPUs with SSE4.2 but no PCLMUL (before 2010) keep one chain for every length. */
#define CRC_BLOCK 4096        /* the largest L, in bytes (a multiple of 8) */
#define CRC_THREE_STREAMS 96  /* the shortest buffer cut in three (at least 24) */

static uint32_t crc_table[8][256];
static uint32_t shift_const[2 * CRC_BLOCK / 8 + 1];
static int have_sse42 = 0;
static int have_pclmul = 0;

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc_table[t][n] = (crc_table[t - 1][n] >> 8) ^ crc_table[0][crc_table[t - 1][n] & 0xFF];
    /* Bit-reflected: bit b holds the coefficient of x^(31-b), so x^31 is 1, and a register
     * times x^8 is (k >> 8) ^ crc_table[0][k & 0xFF] (one zero byte through the CRC). */
    shift_const[1] = 1;
    for (size_t i = 2; i < sizeof shift_const / sizeof shift_const[0]; i++) {
        uint32_t k = shift_const[i - 1];
        for (int byte = 0; byte < 8; byte++)
            k = (k >> 8) ^ crc_table[0][k & 0xFF];
        shift_const[i] = k;
    }
#ifdef CRC_X86
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
    have_pclmul = have_sse42 && __builtin_cpu_supports("pclmul");
#endif
}

static uint32_t crc_sw(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    return c ^ 0xFFFFFFFFu;
}

#ifdef CRC_X86
static inline uint64_t load_word(const uint8_t *p)
{
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

/* One chain: the register c32 carried over n bytes (no inversion). */
__attribute__((target("sse4.2"))) static inline uint32_t crc_hw_chain(uint32_t c32,
                                                                      const uint8_t *p, size_t n)
{
    uint64_t c = c32;
    while (n >= 8) {
        c = __builtin_ia32_crc32di(c, load_word(p));
        p += 8;
        n -= 8;
    }
    c32 = (uint32_t)c;
    if (n & 4) {
        uint32_t half;
        memcpy(&half, p, 4);
        c32 = __builtin_ia32_crc32si(c32, half);
        p += 4;
    }
    if (n & 2) {
        uint16_t quarter;
        memcpy(&quarter, p, 2);
        c32 = __builtin_ia32_crc32hi(c32, quarter);
        p += 2;
    }
    if (n & 1)
        c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(const uint8_t *p, size_t n)
{
    return crc_hw_chain(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

/* r * x^(8L) mod P, unreduced (64 bits): the crc32 instruction finishes the job. */
__attribute__((target("sse4.2,pclmul"))) static inline uint64_t crc_shift(uint32_t r, uint32_t k)
{
    __m128i product =
        _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)r), _mm_cvtsi32_si128((int)k), 0);
    return (uint64_t)_mm_cvtsi128_si64(product);
}

/* Rounds of three blocks as long as possible (a multiple of 8 bytes, at most CRC_BLOCK); the 0
 * to 23 bytes left after the last round, or a buffer too short to cut, go through one chain. */
__attribute__((target("sse4.2,pclmul"))) static uint32_t crc_hw3(const uint8_t *p, size_t n)
{
    uint64_t a = 0xFFFFFFFFu;
    while (n >= CRC_THREE_STREAMS) {
        size_t block = n / 24 * 8;
        if (block > CRC_BLOCK)
            block = CRC_BLOCK;
        uint64_t b = 0, c = 0;
        for (const uint8_t *last = p + block - 8; p < last; p += 8) {
            a = __builtin_ia32_crc32di(a, load_word(p));
            b = __builtin_ia32_crc32di(b, load_word(p + block));
            c = __builtin_ia32_crc32di(c, load_word(p + 2 * block));
        }
        a = __builtin_ia32_crc32di(a, load_word(p));
        b = __builtin_ia32_crc32di(b, load_word(p + block));
        uint64_t shifted = crc_shift((uint32_t)a, shift_const[block / 4]) ^
                           crc_shift((uint32_t)b, shift_const[block / 8]);
        a = __builtin_ia32_crc32di(c, load_word(p + 2 * block) ^ shifted);
        p += 2 * block + 8;
        n -= 3 * block;
    }
    return crc_hw_chain((uint32_t)a, p, n) ^ 0xFFFFFFFFu;
}
#endif

static uint32_t crc32c(const uint8_t *p, size_t n)
{
#ifdef CRC_X86
    if (have_pclmul)
        return crc_hw3(p, n);
    if (have_sse42)
        return crc_hw(p, n);
#endif
    return crc_sw(p, n);
}

static uint32_t masked_crc(const uint8_t *p, size_t n)
{
    uint32_t c = crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
#else
static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
#endif

static double load_f64(const uint8_t *p)
{
    uint64_t bits = load_u64(p);
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

static float load_f32(const uint8_t *p)
{
    uint32_t bits = load_u32(p);
    float v;
    memcpy(&v, &bits, 4);
    return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Protobuf wire format                                                                        */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Span;

/* Read a varint at *pp (< end). 0 on success; -1 when cut off or longer than 10 bytes. */
static int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return -1; /* overflows 64 bits: leave it to the reference decoder */
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

/* One field: number, wire type and where its value lies. 0 ok, -1 malformed. */
typedef struct {
    uint32_t number;
    int wire;
    uint64_t varint; /* wire 0 */
    const uint8_t *data; /* wire 1 (8 bytes), 2 (len bytes), 5 (4 bytes) */
    Py_ssize_t len;
} Field;

static int next_field(const uint8_t **pp, const uint8_t *end, Field *f)
{
    uint64_t key;
    if (read_varint(pp, end, &key) < 0)
        return -1;
    if ((key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF)
        return -1;
    f->number = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    const uint8_t *p = *pp;
    switch (f->wire) {
    case 0:
        if (read_varint(pp, end, &f->varint) < 0)
            return -1;
        return 0;
    case 1:
        if (end - p < 8)
            return -1;
        f->data = p;
        f->len = 8;
        *pp = p + 8;
        return 0;
    case 5:
        if (end - p < 4)
            return -1;
        f->data = p;
        f->len = 4;
        *pp = p + 4;
        return 0;
    case 2: {
        uint64_t len;
        if (read_varint(pp, end, &len) < 0)
            return -1;
        p = *pp;
        if (len > (uint64_t)(end - p))
            return -1;
        f->data = p;
        f->len = (Py_ssize_t)len;
        *pp = p + len;
        return 0;
    }
    default:
        return -1; /* groups and invalid wire types */
    }
}

/* The next field of a message whose known fields all number <= ``max`` and may each appear
 * at most once (``*seen``: bit set of the numbers read). -1 when malformed, out of range or
 * repeated: the caller falls back. */
static inline int next_field_once(const uint8_t **pp, const uint8_t *end, Field *f, int *seen,
                                  uint32_t max)
{
    if (next_field(pp, end, f) < 0 || f->number > max || (*seen & (1 << f->number)))
        return -1;
    *seen |= 1 << f->number;
    return 0;
}

/* Strict UTF-8 check (no overlongs, surrogates or code points above U+10FFFF), as protobuf
 * checks proto3 strings. */
static int valid_utf8(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int need;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i <= need)
            return 0;
        for (int k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += need + 1;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Parsed values of one Event (before anything is committed)                                  */
/* ------------------------------------------------------------------------------------------ */

enum { V_NONE = 0, V_SIMPLE = 2, V_HISTO = 5, V_TENSOR = 8 };
enum { DT_FLOAT = 1, DT_DOUBLE = 2 };
/* Row kinds written to the ``kinds`` column. */
enum { K_HISTO = 0, K_TENSOR_HIST = 1, K_SIMPLE = 2, K_TENSOR_SCALAR = 3 };
/* The bits of the tally's ``encodings``. */
enum { ENCODING_HISTO = 0, ENCODING_TENSOR = 1, ENCODING_SIMPLE_VALUE = 2 };
/* Plugin codes. */
enum { P_UNKNOWN = 0, P_HISTOGRAMS = 1, P_SCALARS = 2, P_OTHER = 3 };

typedef struct {
    int kind;
    Span tag;
    int has_metadata;
    Span plugin; /* plugin_data.plugin_name, possibly empty */
    float simple;
    double hfields[5];
    Span limits, buckets;
    int64_t dtype;
    int ndims;
    int64_t dim0, dim1;
    int all_ones, negative_dim;
    Span content;
    Py_ssize_t nfloat, ndouble;
    float first_float;
    double first_double;
    /* resolved before commit */
    Py_ssize_t tag_id;
    int row_kind; /* -1: no row */
    int pending;  /* tensor whose plugin is unknown, kept as a candidate (range scans) */
    Py_ssize_t ndata;
} Value;

/* ------------------------------------------------------------------------------------------ */
/* Tags and their placement state                                                              */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    int seen;
    int64_t first_step;
    int64_t last_step;
    int64_t values_at_step;
    int64_t restarts;
} Steps;

typedef struct {
    PyObject *name; /* str */
    char *bytes;
    Py_ssize_t len;
    uint64_t hash;
    int plugin;
    uint64_t plugin_generation;
    Steps hist, scalar;
    PyObject *first_count; /* element count of the index-0 histogram at the current step */
    int collision_at_step;
    PyObject *collecting; /* list of counts being filled for a collision notice, or NULL */
    int reported;         /* a collision notice was given for this tag in this run */
    int registered;       /* a collision of this tag waits for its notice */
} Tag;

typedef struct {
    PyObject_HEAD
    PyObject *plugins;    /* dict str -> str, shared with the Python decoder */
    PyObject *tag_names;  /* list of str, by tag id */
    PyObject *collisions; /* list of (tag, step, counts) registered in this file */
    Tag *tags;
    Py_ssize_t ntags, cap_tags;
    Py_ssize_t *table; /* open addressing: tag id + 1, 0 empty */
    Py_ssize_t table_size;
    uint64_t plugin_generation;
    int64_t run_restarts;
    int keep_unknown; /* range scans: keep tensors of unknown plugin as pending rows */
    /* tally since the last take_tally() */
    int64_t records, events;
    long whats, encodings;
    PyObject *file_version, *writer;
    Value *values;
    Py_ssize_t cap_values;
} Scanner;

static uint64_t hash_bytes(const uint8_t *p, Py_ssize_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int table_grow(Scanner *s)
{
    Py_ssize_t size = s->table_size ? s->table_size * 2 : 256;
    Py_ssize_t *table = PyMem_Calloc((size_t)size, sizeof(Py_ssize_t));
    if (!table) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t id = 0; id < s->ntags; id++) {
        Py_ssize_t slot = (Py_ssize_t)(s->tags[id].hash & (uint64_t)(size - 1));
        while (table[slot])
            slot = (slot + 1) & (size - 1);
        table[slot] = id + 1;
    }
    PyMem_Free(s->table);
    s->table = table;
    s->table_size = size;
    return 0;
}

/* The id of a tag's bytes, interning it (its str) when new. -1 with an exception set on
 * error; -2 when the bytes are not valid UTF-8 (no exception). */
static Py_ssize_t tag_id(Scanner *s, Span tag)
{
    uint64_t h = hash_bytes(tag.p, tag.n);
    if (s->table_size) {
        Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)(s->table_size - 1));
        while (s->table[slot]) {
            Tag *t = &s->tags[s->table[slot] - 1];
            if (t->hash == h && t->len == tag.n && memcmp(t->bytes, tag.p, (size_t)tag.n) == 0)
                return s->table[slot] - 1;
            slot = (slot + 1) & (s->table_size - 1);
        }
    }
    if (!valid_utf8(tag.p, tag.n))
        return -2;
    if ((s->ntags + 1) * 2 > s->table_size && table_grow(s) < 0)
        return -1;
    if (s->ntags == s->cap_tags) {
        Py_ssize_t cap = s->cap_tags ? s->cap_tags * 2 : 64;
        Tag *tags = PyMem_Realloc(s->tags, (size_t)cap * sizeof(Tag));
        if (!tags) {
            PyErr_NoMemory();
            return -1;
        }
        s->tags = tags;
        s->cap_tags = cap;
    }
    PyObject *name = PyUnicode_DecodeUTF8((const char *)tag.p, tag.n, "strict");
    if (!name)
        return -1;
    char *bytes = PyMem_Malloc((size_t)tag.n + 1);
    if (!bytes) {
        Py_DECREF(name);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(bytes, tag.p, (size_t)tag.n);
    if (PyList_Append(s->tag_names, name) < 0) {
        Py_DECREF(name);
        PyMem_Free(bytes);
        return -1;
    }
    Py_ssize_t id = s->ntags++;
    Tag *t = &s->tags[id];
    memset(t, 0, sizeof(Tag));
    t->name = name;
    t->bytes = bytes;
    t->len = tag.n;
    t->hash = h;
    t->plugin_generation = (uint64_t)-1;
    Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)(s->table_size - 1));
    while (s->table[slot])
        slot = (slot + 1) & (s->table_size - 1);
    s->table[slot] = id + 1;
    return id;
}

static int plugin_code_of(PyObject *name)
{
    if (PyUnicode_CompareWithASCIIString(name, "histograms") == 0)
        return P_HISTOGRAMS;
    if (PyUnicode_CompareWithASCIIString(name, "scalars") == 0)
        return P_SCALARS;
    return P_OTHER;
}

/* The plugin remembered for a tag (reads the shared dict after Python changed it). */
static int remembered_plugin(Scanner *s, Tag *t)
{
    if (t->plugin_generation != s->plugin_generation) {
        PyObject *name = PyDict_GetItemWithError(s->plugins, t->name);
        if (!name && PyErr_Occurred())
            return -1;
        t->plugin = name && PyUnicode_Check(name) ? plugin_code_of(name) : P_UNKNOWN;
        t->plugin_generation = s->plugin_generation;
    }
    return t->plugin;
}

/* ------------------------------------------------------------------------------------------ */
/* Parsing (no side effects but tag interning)                                                */
/* ------------------------------------------------------------------------------------------ */

#define FALLBACK 1 /* not for this decoder: the reference decoder reads the record */

static int parse_plugin_data(Span m, Value *v)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    int seen = 0;
    Field f;
    while (p < end) {
        if (next_field(&p, end, &f) < 0)
            return FALLBACK;
        if (f.number == 1 && f.wire == 2 && !(seen & 1)) {
            if (!valid_utf8(f.data, f.len))
                return FALLBACK;
            v->plugin.p = f.data;
            v->plugin.n = f.len;
            seen |= 1;
        } else if (f.number == 2 && f.wire == 2 && !(seen & 2)) {
            seen |= 2; /* content: bytes */
        } else {
            return FALLBACK;
        }
    }
    return 0;
}

static int parse_metadata(Span m, Value *v)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    int seen = 0;
    Field f;
    v->has_metadata = 1;
    v->plugin.p = NULL;
    v->plugin.n = 0;
    while (p < end) {
        if (next_field_once(&p, end, &f, &seen, 4) < 0)
            return FALLBACK;
        if (f.number == 1 && f.wire == 2) {
            Span d = {f.data, f.len};
            if (parse_plugin_data(d, v))
                return FALLBACK;
        } else if ((f.number == 2 || f.number == 3) && f.wire == 2) {
            if (!valid_utf8(f.data, f.len))
                return FALLBACK;
        } else if (!(f.number == 4 && f.wire == 0)) {
            return FALLBACK;
        }
    }
    return 0;
}

static int parse_histo(Span m, Value *v)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    int seen = 0;
    Field f;
    memset(v->hfields, 0, sizeof(v->hfields));
    v->limits.n = v->buckets.n = 0;
    v->limits.p = v->buckets.p = NULL;
    while (p < end) {
        if (next_field_once(&p, end, &f, &seen, 7) < 0)
            return FALLBACK;
        if (f.number <= 5 && f.wire == 1) {
            v->hfields[f.number - 1] = load_f64(f.data);
        } else if (f.number >= 6 && f.wire == 2 && f.len % 8 == 0) {
            Span d = {f.data, f.len};
            if (f.number == 6)
                v->limits = d;
            else
                v->buckets = d;
        } else {
            return FALLBACK; /* unpacked or odd encodings: the reference decoder */
        }
    }
    if (v->limits.n != v->buckets.n || v->limits.n == 0)
        return FALLBACK;
    return 0;
}

static int parse_shape(Span m, Value *v)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    Field f;
    while (p < end) {
        if (next_field(&p, end, &f) < 0 || f.number != 2 || f.wire != 2)
            return FALLBACK;
        const uint8_t *q = f.data, *qend = f.data + f.len;
        int64_t size = 0;
        int seen = 0;
        Field g;
        while (q < qend) {
            if (next_field(&q, qend, &g) < 0 || g.number != 1 || g.wire != 0 || seen)
                return FALLBACK;
            size = (int64_t)g.varint;
            seen = 1;
        }
        if (v->ndims == 0)
            v->dim0 = size;
        else if (v->ndims == 1)
            v->dim1 = size;
        if (size != 1)
            v->all_ones = 0;
        if (size < 0)
            v->negative_dim = 1;
        if (++v->ndims > 64)
            return FALLBACK;
    }
    return 0;
}

static int parse_tensor(Span m, Value *v)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    int seen = 0;
    Field f;
    v->dtype = 0;
    v->ndims = 0;
    v->dim0 = v->dim1 = 0;
    v->all_ones = 1;
    v->negative_dim = 0;
    v->content.p = NULL;
    v->content.n = 0;
    v->nfloat = v->ndouble = 0;
    while (p < end) {
        if (next_field(&p, end, &f) < 0)
            return FALLBACK;
        if (f.number == 5 || f.number == 6) { /* float_val / double_val, packed or not */
            int width = f.number == 5 ? 4 : 8;
            Py_ssize_t count;
            const uint8_t *first;
            if (f.wire == 2 && f.len % width == 0) {
                count = f.len / width;
                first = f.data;
            } else if ((width == 4 && f.wire == 5) || (width == 8 && f.wire == 1)) {
                count = 1;
                first = f.data;
            } else {
                return FALLBACK;
            }
            if (width == 4) {
                if (v->nfloat == 0 && count)
                    v->first_float = load_f32(first);
                v->nfloat += count;
            } else {
                if (v->ndouble == 0 && count)
                    v->first_double = load_f64(first);
                v->ndouble += count;
            }
            continue;
        }
        if (f.number > 4 || (seen & (1 << f.number)))
            return FALLBACK;
        seen |= 1 << f.number;
        if (f.number == 1 && f.wire == 0) {
            v->dtype = (int64_t)f.varint;
        } else if (f.number == 2 && f.wire == 2) {
            Span d = {f.data, f.len};
            if (parse_shape(d, v))
                return FALLBACK;
        } else if (f.number == 4 && f.wire == 2) {
            v->content.p = f.data;
            v->content.n = f.len;
        } else {
            return FALLBACK; /* version_number and anything else */
        }
    }
    return 0;
}

static int parse_value(Scanner *s, Span m, Value *v)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    int seen = 0;
    Field f;
    memset(v, 0, sizeof(Value));
    v->row_kind = -1;
    while (p < end) {
        if (next_field_once(&p, end, &f, &seen, 9) < 0)
            return FALLBACK;
        Span d = {f.data, f.len};
        if (f.number == 1 && f.wire == 2) {
            v->tag = d;
        } else if (f.number == 2 && f.wire == 5) {
            v->kind = V_SIMPLE;
            v->simple = load_f32(f.data);
        } else if (f.number == 5 && f.wire == 2) {
            v->kind = V_HISTO;
            if (parse_histo(d, v))
                return FALLBACK;
        } else if (f.number == 8 && f.wire == 2) {
            v->kind = V_TENSOR;
            if (parse_tensor(d, v))
                return FALLBACK;
        } else if (f.number == 9 && f.wire == 2) {
            if (parse_metadata(d, v))
                return FALLBACK;
        } else {
            return FALLBACK; /* images, audio, node_name, ...: the reference decoder */
        }
    }
    if (((seen >> 2) & 1) + ((seen >> 5) & 1) + ((seen >> 8) & 1) > 1)
        return FALLBACK; /* several members of the oneof */
    if (v->has_metadata && v->plugin.n == 7 && memcmp(v->plugin.p, "hparams", 7) == 0)
        return FALLBACK; /* hyperparameters (a few per run): decoded by the reference */
    if (v->kind == V_NONE)
        return 0;
    if (!v->tag.p)
        v->tag.p = (const uint8_t *)"";
    v->tag_id = tag_id(s, v->tag);
    if (v->tag_id == -1)
        return -1;
    if (v->tag_id == -2)
        return FALLBACK;
    return 0;
}

/* What an Event holds: its field number (the bits of the tally's ``whats``). */
enum { WHAT_NONE = 0, WHAT_FILE_VERSION = 3, WHAT_SUMMARY = 5 };

typedef struct {
    double wall_time;
    int64_t step;
    int what; /* WHAT_NONE, WHAT_FILE_VERSION or WHAT_SUMMARY */
    Span file_version, writer, summary;
    Py_ssize_t nvalues;
} Event;

static int grow_values(Scanner *s, Py_ssize_t need)
{
    if (need <= s->cap_values)
        return 0;
    Py_ssize_t cap = s->cap_values ? s->cap_values : 16;
    while (cap < need)
        cap *= 2;
    Value *values = PyMem_Realloc(s->values, (size_t)cap * sizeof(Value));
    if (!values) {
        PyErr_NoMemory();
        return -1;
    }
    s->values = values;
    s->cap_values = cap;
    return 0;
}

static int parse_source(Span m, Event *e)
{
    const uint8_t *p = m.p, *end = m.p + m.n;
    int seen = 0;
    Field f;
    while (p < end) {
        if (next_field(&p, end, &f) < 0 || f.number != 1 || f.wire != 2 || seen)
            return FALLBACK;
        if (!valid_utf8(f.data, f.len))
            return FALLBACK;
        e->writer.p = f.data;
        e->writer.n = f.len;
        seen = 1;
    }
    return 0;
}

static int parse_event(Scanner *s, const uint8_t *payload, Py_ssize_t n, Event *e)
{
    const uint8_t *p = payload, *end = payload + n;
    int seen = 0;
    Field f;
    memset(e, 0, sizeof(Event));
    while (p < end) {
        if (next_field_once(&p, end, &f, &seen, 10) < 0)
            return FALLBACK;
        Span d = {f.data, f.len};
        if (f.number == 1 && f.wire == 1) {
            e->wall_time = load_f64(f.data);
        } else if (f.number == 2 && f.wire == 0) {
            e->step = (int64_t)f.varint;
        } else if (f.number == 3 && f.wire == 2) {
            if (!valid_utf8(f.data, f.len))
                return FALLBACK;
            e->what = WHAT_FILE_VERSION;
            e->file_version = d;
        } else if (f.number == 5 && f.wire == 2) {
            e->what = WHAT_SUMMARY;
            e->summary = d;
        } else if (f.number == 10 && f.wire == 2) {
            if (parse_source(d, e))
                return FALLBACK;
        } else {
            return FALLBACK; /* graphs, session logs, ...: the reference decoder */
        }
    }
    if ((seen & (1 << 3)) && (seen & (1 << 5)))
        return FALLBACK;
    if (e->what != WHAT_SUMMARY)
        return 0;
    p = e->summary.p;
    end = p + e->summary.n;
    while (p < end) {
        if (next_field(&p, end, &f) < 0 || f.number != 1 || f.wire != 2)
            return FALLBACK;
        if (grow_values(s, e->nvalues + 1) < 0)
            return -1;
        Span d = {f.data, f.len};
        int rc = parse_value(s, d, &s->values[e->nvalues]);
        if (rc)
            return rc;
        e->nvalues++;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Resolving plugins and rows (still no side effects)                                          */
/* ------------------------------------------------------------------------------------------ */

static int hist_tensor_ok(const Value *v)
{
    int64_t width = v->dtype == DT_DOUBLE ? 8 : v->dtype == DT_FLOAT ? 4 : 0;
    return width && v->ndims == 2 && v->dim1 == 3 && v->dim0 > 0 && v->content.n > 0 &&
           v->dim0 <= (INT64_MAX / 24) && v->content.n == v->dim0 * 3 * width;
}

static int scalar_tensor_ok(const Value *v)
{
    int64_t width = v->dtype == DT_DOUBLE ? 8 : v->dtype == DT_FLOAT ? 4 : 0;
    if (!width || !v->all_ones || v->negative_dim)
        return 0;
    return v->content.n == 0 || v->content.n == width;
}

static double scalar_tensor_value(const Value *v)
{
    if (v->content.n)
        return v->dtype == DT_DOUBLE ? load_f64(v->content.p) : (double)load_f32(v->content.p);
    if (v->dtype == DT_DOUBLE)
        return v->ndouble ? v->first_double : 0.0;
    return v->nfloat ? (double)v->first_float : 0.0;
}

/* The plugin each tensor value resolves to, as the reference decoder would, without changing
 * the remembered plugins; decide each value's row. FALLBACK when a value needs the reference. */
static int resolve_rows(Scanner *s, Event *e)
{
    for (Py_ssize_t i = 0; i < e->nvalues; i++) {
        Value *v = &s->values[i];
        v->row_kind = -1;
        v->pending = 0;
        if (v->kind == V_SIMPLE) {
            v->row_kind = K_SIMPLE;
        } else if (v->kind == V_HISTO) {
            v->row_kind = K_HISTO;
            v->ndata = v->limits.n / 4; /* limits and buckets */
        } else if (v->kind == V_TENSOR) {
            int plugin = P_UNKNOWN;
            Span named = {NULL, 0};
            if (v->has_metadata && v->plugin.n) {
                named = v->plugin;
            } else {
                for (Py_ssize_t j = i - 1; j >= 0; j--) { /* set earlier in this event? */
                    Value *w = &s->values[j];
                    if (w->kind == V_TENSOR && w->tag_id == v->tag_id && w->has_metadata &&
                        w->plugin.n) {
                        named = w->plugin;
                        break;
                    }
                }
            }
            if (named.n) {
                if (named.n == 10 && memcmp(named.p, "histograms", 10) == 0)
                    plugin = P_HISTOGRAMS;
                else if (named.n == 7 && memcmp(named.p, "scalars", 7) == 0)
                    plugin = P_SCALARS;
                else
                    plugin = P_OTHER;
            } else {
                plugin = remembered_plugin(s, &s->tags[v->tag_id]);
                if (plugin < 0)
                    return -1;
            }
            if (plugin == P_HISTOGRAMS) {
                if (!hist_tensor_ok(v))
                    return FALLBACK;
                v->row_kind = K_TENSOR_HIST;
            } else if (plugin == P_SCALARS) {
                if (!scalar_tensor_ok(v))
                    return FALLBACK;
                v->row_kind = K_TENSOR_SCALAR;
            } else if (plugin == P_UNKNOWN && s->keep_unknown) {
                if (hist_tensor_ok(v)) {
                    v->row_kind = K_TENSOR_HIST;
                    v->pending = 1;
                } else if (scalar_tensor_ok(v)) {
                    v->row_kind = K_TENSOR_SCALAR;
                    v->pending = 1;
                } else {
                    return FALLBACK;
                }
            }
            if (v->row_kind == K_TENSOR_HIST)
                v->ndata = (Py_ssize_t)v->dim0 * 3;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Committing: plugin memory, placement, collisions, rows                                     */
/* ------------------------------------------------------------------------------------------ */

/* numpy's pairwise summation (float64, any stride), so that element counts match
 * ``counts.sum()`` bit for bit. One body for both element types, expanded per loader so
 * that each scan loop keeps its own inlined load (float32 tensors are widened to float64
 * first by the reference: same summation). */
#define DEFINE_PAIRWISE_SUM(name, LOAD)                                                        \
    static double name(const uint8_t *a, Py_ssize_t n, Py_ssize_t stride)                      \
    {                                                                                          \
        if (n < 8) {                                                                           \
            double res = 0.;                                                                   \
            for (Py_ssize_t i = 0; i < n; i++)                                                 \
                res += LOAD(a + i * stride);                                                   \
            return res;                                                                        \
        }                                                                                      \
        if (n <= 128) {                                                                        \
            double r[8];                                                                       \
            Py_ssize_t i;                                                                      \
            for (int j = 0; j < 8; j++)                                                        \
                r[j] = LOAD(a + j * stride);                                                   \
            for (i = 8; i < n - (n % 8); i += 8)                                               \
                for (int j = 0; j < 8; j++)                                                    \
                    r[j] += LOAD(a + (i + j) * stride);                                        \
            double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));   \
            for (; i < n; i++)                                                                 \
                res += LOAD(a + i * stride);                                                   \
            return res;                                                                        \
        }                                                                                      \
        Py_ssize_t n2 = n / 2;                                                                 \
        n2 -= n2 % 8;                                                                          \
        return name(a, n2, stride) + name(a + n2 * stride, n - n2, stride);                    \
    }

static double load_f32_as_f64(const uint8_t *p) { return (double)load_f32(p); }

DEFINE_PAIRWISE_SUM(pairwise_sum, load_f64)
DEFINE_PAIRWISE_SUM(pairwise_sum_f32, load_f32_as_f64)

/* ``element_count``: an int, or None when the total is not finite. New reference. */
static PyObject *count_object(double total)
{
    if (isfinite(total))
        return PyLong_FromDouble(total);
    Py_RETURN_NONE;
}

/* Place a value of ``tag`` at ``step``: its index, and *restart_from set to the step it went
 * back from when a restart notice is due (else left alone). ``count`` (a new reference or
 * NULL) is a histogram's element count; histograms only. Mirrors reader._RunState.place. */
static int64_t place(Scanner *s, Tag *t, int histogram, int64_t step, PyObject *count,
                     int *restart, int64_t *restart_from, int *error)
{
    Steps *st = histogram ? &t->hist : &t->scalar;
    int64_t index;
    *restart = 0;
    if (!st->seen) {
        st->seen = 1;
        st->first_step = step;
        st->last_step = step;
        st->values_at_step = 1;
        index = 0;
        if (histogram)
            t->collision_at_step = 0;
    } else if (step == st->last_step) {
        index = st->values_at_step++;
    } else {
        if (step < st->last_step) {
            st->restarts++;
            if (st->restarts > s->run_restarts) {
                s->run_restarts = st->restarts;
                *restart = 1;
                *restart_from = st->last_step;
            }
        }
        st->last_step = step;
        st->values_at_step = 1;
        index = 0;
        if (histogram) {
            t->collision_at_step = 0;
            Py_CLEAR(t->collecting);
        }
    }
    if (!histogram)
        return index;
    if (index == 0) {
        Py_XSETREF(t->first_count, count);
        return index;
    }
    if (!t->collision_at_step) {
        t->collision_at_step = 1;
        if (!t->reported && !t->registered) {
            PyObject *counts = PyList_New(0);
            PyObject *first = t->first_count ? t->first_count : Py_None;
            PyObject *entry = counts ? Py_BuildValue("(OLO)", t->name, (long long)step, counts)
                                     : NULL;
            if (!entry || PyList_Append(counts, first) < 0 ||
                PyList_Append(s->collisions, entry) < 0) {
                Py_XDECREF(entry);
                Py_XDECREF(counts);
                Py_XDECREF(count);
                *error = 1;
                return 0;
            }
            Py_DECREF(entry);
            t->registered = 1;
            Py_XSETREF(t->collecting, counts);
        }
    }
    if (t->collecting && index < 64) {
        if (PyList_Append(t->collecting, count ? count : Py_None) < 0)
            *error = 1;
    }
    Py_XDECREF(count);
    return index;
}

typedef struct {
    Py_buffer b[13];
    Py_ssize_t rows, data_cap;
    int64_t *offsets, *steps, *starts, *aux;
    int32_t *tag_ids, *indexes, *sizes;
    double *walls, *values, *fields, *data;
    uint8_t *kinds, *flags;
} Out;

enum { FLAG_RESTART = 1, FLAG_PENDING = 2 };

/* How many values a histogram summarises, before ``element_count`` makes it an int: ``num``
 * of a HistogramProto, else the bucket counts' total (numpy's pairwise sum). */
static double histogram_total(const Value *v)
{
    if (v->row_kind == K_HISTO)
        return v->hfields[2];
    if (v->dtype == DT_DOUBLE)
        return pairwise_sum(v->content.p + 16, (Py_ssize_t)v->dim0, 24);
    return pairwise_sum_f32(v->content.p + 8, (Py_ssize_t)v->dim0, 12);
}

static void copy_data(const Value *v, double *out)
{
    if (v->row_kind == K_HISTO) {
        Py_ssize_t k = v->limits.n / 8;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(out, v->limits.p, (size_t)k * 8); /* two block copies, not one value at a time */
        memcpy(out + k, v->buckets.p, (size_t)k * 8);
#else
        for (Py_ssize_t i = 0; i < k; i++) {
            out[i] = load_f64(v->limits.p + 8 * i);
            out[k + i] = load_f64(v->buckets.p + 8 * i);
        }
#endif
    } else if (v->dtype == DT_DOUBLE) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(out, v->content.p, (size_t)v->ndata * 8);
#else
        for (Py_ssize_t i = 0; i < v->ndata; i++)
            out[i] = load_f64(v->content.p + 8 * i);
#endif
    } else {
        for (Py_ssize_t i = 0; i < v->ndata; i++)
            out[i] = (double)load_f32(v->content.p + 4 * i);
    }
}

static int remember_plugin(Scanner *s, Value *v)
{
    Tag *t = &s->tags[v->tag_id];
    PyObject *name = PyUnicode_DecodeUTF8((const char *)v->plugin.p, v->plugin.n, "strict");
    if (!name)
        return -1;
    int rc = PyDict_SetItem(s->plugins, t->name, name);
    if (rc == 0) {
        t->plugin = plugin_code_of(name);
        t->plugin_generation = s->plugin_generation;
    }
    Py_DECREF(name);
    return rc;
}

static int set_first(PyObject **slot, Span text)
{
    if (*slot)
        return 0;
    *slot = PyUnicode_DecodeUTF8((const char *)text.p, text.n, "strict");
    return *slot ? 0 : -1;
}

/* Commit one parsed event: rows from ``*row``, data from ``*data``. */
static int commit_event(Scanner *s, Event *e, int64_t offset, Out *out, Py_ssize_t *row,
                        Py_ssize_t *data)
{
    s->records++;
    s->events++;
    s->whats |= 1L << e->what;
    if (e->what == WHAT_FILE_VERSION && set_first(&s->file_version, e->file_version) < 0)
        return -1;
    if (e->writer.n && set_first(&s->writer, e->writer) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < e->nvalues; i++) {
        Value *v = &s->values[i];
        if (v->kind == V_TENSOR && v->has_metadata && v->plugin.n && remember_plugin(s, v) < 0)
            return -1;
        if (v->row_kind < 0)
            continue;
        Tag *t = &s->tags[v->tag_id];
        int histogram = v->row_kind == K_HISTO || v->row_kind == K_TENSOR_HIST;
        double total = histogram ? histogram_total(v) : 0.0;
        PyObject *count = NULL;
        if (histogram && !(count = count_object(total)))
            return -1;
        int restart = 0, error = 0;
        int64_t restart_from = 0;
        int64_t index = place(s, t, histogram, e->step, count, &restart, &restart_from, &error);
        if (error)
            return -1;
        Py_ssize_t r = (*row)++;
        out->offsets[r] = offset;
        out->tag_ids[r] = (int32_t)v->tag_id;
        out->indexes[r] = (int32_t)(index > INT32_MAX ? INT32_MAX : index);
        out->steps[r] = e->step;
        out->walls[r] = e->wall_time;
        out->kinds[r] = (uint8_t)v->row_kind;
        out->flags[r] = (uint8_t)((restart ? FLAG_RESTART : 0) | (v->pending ? FLAG_PENDING : 0));
        out->aux[r] = restart_from;
        out->values[r] = v->row_kind == K_SIMPLE ? (double)v->simple
                         : v->row_kind == K_TENSOR_SCALAR ? scalar_tensor_value(v)
                                                          : total; /* a histogram's */
        out->starts[r] = *data;
        out->sizes[r] = 0;
        for (int j = 0; j < 5; j++)
            out->fields[5 * r + j] = v->row_kind == K_HISTO ? v->hfields[j] : 0.0;
        if (histogram) {
            out->sizes[r] = (int32_t)(v->row_kind == K_HISTO ? v->limits.n / 8 : v->dim0);
            copy_data(v, out->data + *data);
            *data += v->ndata;
        }
        if (!v->pending) /* a pending row's encoding counts once its plugin is known */
            s->encodings |= 1L << (v->row_kind == K_HISTO    ? ENCODING_HISTO
                                   : v->row_kind == K_SIMPLE ? ENCODING_SIMPLE_VALUE
                                                             : ENCODING_TENSOR);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The scan                                                                                    */
/* ------------------------------------------------------------------------------------------ */

enum { STOP_FULL = 0, STOP_MORE = 1, STOP_DAMAGE = 2, STOP_FALLBACK = 3, STOP_LIMIT = 4 };

static const char *column_formats = "qiiqdBBqdqidd";

static int get_out(PyObject *columns, Out *out)
{
    if (!PyTuple_Check(columns) || PyTuple_GET_SIZE(columns) != 13) {
        PyErr_SetString(PyExc_TypeError, "columns: a tuple of 13 arrays");
        return -1;
    }
    static const Py_ssize_t item[13] = {8, 4, 4, 8, 8, 1, 1, 8, 8, 8, 4, 8, 8};
    for (int i = 0; i < 13; i++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(columns, i), &out->b[i],
                               PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            for (int j = 0; j < i; j++)
                PyBuffer_Release(&out->b[j]);
            return -1;
        }
    }
    out->rows = out->b[0].len / 8;
    for (int i = 0; i < 12; i++) {
        Py_ssize_t need = i == 11 ? out->rows * 5 * 8 : out->rows * item[i];
        if (out->b[i].len < need) {
            for (int j = 0; j < 13; j++)
                PyBuffer_Release(&out->b[j]);
            PyErr_Format(PyExc_ValueError, "column %d (%c) too short", i, column_formats[i]);
            return -1;
        }
    }
    out->data_cap = out->b[12].len / 8;
    out->offsets = out->b[0].buf;
    out->tag_ids = out->b[1].buf;
    out->indexes = out->b[2].buf;
    out->steps = out->b[3].buf;
    out->walls = out->b[4].buf;
    out->kinds = out->b[5].buf;
    out->flags = out->b[6].buf;
    out->aux = out->b[7].buf;
    out->values = out->b[8].buf;
    out->starts = out->b[9].buf;
    out->sizes = out->b[10].buf;
    out->fields = out->b[11].buf;
    out->data = out->b[12].buf;
    return 0;
}

static void release_out(Out *out)
{
    for (int j = 0; j < 13; j++)
        PyBuffer_Release(&out->b[j]);
}

#define MAX_PLAUSIBLE_LENGTH (1ull << 31)

PyDoc_STRVAR(scan_doc,
"scan(buffer, pos, base, limit, columns) -> (rows, pos, stop, needed)\n\n"
"Read the records of ``buffer`` from index ``pos`` (file offset ``base + pos``) into the\n"
"columns, until they are full (stop 0), the buffer ends before a complete record (1, with the\n"
"bytes ``needed`` from ``pos``), a record is damaged (2) or is for the reference decoder (3),\n"
"or a record starts at or after file offset ``limit`` (4; -1 for no limit). The ``values``\n"
"column holds a scalar's value, or how many values a histogram summarises (``num``, else the\n"
"bucket total: ``reader.element_count`` before its int).");

static PyObject *Scanner_scan(Scanner *s, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos;
    long long base, limit;
    PyObject *columns;
    if (!PyArg_ParseTuple(args, "y*nLLO", &buf, &pos, &base, &limit, &columns))
        return NULL;
    Out out;
    if (get_out(columns, &out) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    const uint8_t *b = buf.buf;
    Py_ssize_t n = buf.len, row = 0, data = 0, needed = 0;
    int stop = STOP_FULL, failed = 0;
    if (pos < 0 || pos > n) {
        PyErr_SetString(PyExc_ValueError, "pos outside the buffer");
        failed = 1;
    }
    while (!failed) {
        if (limit >= 0 && base + pos >= limit) {
            stop = STOP_LIMIT;
            break;
        }
        if (n - pos < 12) {
            stop = STOP_MORE;
            needed = 12;
            break;
        }
        uint64_t length = load_u64(b + pos);
        if (masked_crc(b + pos, 8) != load_u32(b + pos + 8) || length > MAX_PLAUSIBLE_LENGTH) {
            stop = STOP_DAMAGE;
            break;
        }
        if ((uint64_t)(n - pos - 12) < length + 4) {
            stop = STOP_MORE;
            needed = (Py_ssize_t)length + 16;
            break;
        }
        const uint8_t *payload = b + pos + 12;
        if (masked_crc(payload, (size_t)length) != load_u32(payload + length)) {
            stop = STOP_DAMAGE;
            break;
        }
        Event e;
        int rc = parse_event(s, payload, (Py_ssize_t)length, &e);
        if (rc == 0)
            rc = resolve_rows(s, &e);
        if (rc < 0) {
            failed = 1;
            break;
        }
        if (rc == FALLBACK) {
            stop = STOP_FALLBACK;
            break;
        }
        Py_ssize_t rows_needed = 0, data_needed = 0;
        for (Py_ssize_t i = 0; i < e.nvalues; i++) {
            if (s->values[i].row_kind >= 0) {
                rows_needed++;
                if (s->values[i].row_kind == K_HISTO || s->values[i].row_kind == K_TENSOR_HIST)
                    data_needed += s->values[i].ndata;
            }
        }
        if (row + rows_needed > out.rows || data + data_needed > out.data_cap) {
            stop = STOP_FULL;
            needed = rows_needed > data_needed ? rows_needed : data_needed;
            break;
        }
        if (commit_event(s, &e, base + pos, &out, &row, &data) < 0) {
            failed = 1;
            break;
        }
        pos += (Py_ssize_t)length + 16;
    }
    release_out(&out);
    PyBuffer_Release(&buf);
    if (failed)
        return NULL;
    return Py_BuildValue("(nnin)", row, pos, stop, needed);
}

PyDoc_STRVAR(place_doc,
"place(histogram, tag, step, count) -> (index, restart_from)\n\n"
"Place a value the reference decoder read (same state as the scan): its index among the\n"
"tag's values at ``step``, and the step it went back from when a restart notice is due\n"
"(else None). ``count``: a histogram's element count (int or None).");

static PyObject *Scanner_place(Scanner *s, PyObject *args)
{
    int histogram;
    PyObject *tag, *count;
    long long step;
    if (!PyArg_ParseTuple(args, "pULO", &histogram, &tag, &step, &count))
        return NULL;
    Py_ssize_t size;
    const char *text = PyUnicode_AsUTF8AndSize(tag, &size);
    if (!text)
        return NULL;
    Span span = {(const uint8_t *)text, size};
    Py_ssize_t id = tag_id(s, span);
    if (id == -1)
        return NULL;
    if (id == -2) {
        PyErr_SetString(PyExc_ValueError, "tag is not valid UTF-8");
        return NULL;
    }
    int restart = 0, error = 0;
    int64_t restart_from = 0;
    Py_INCREF(count);
    int64_t index = place(s, &s->tags[id], histogram, step, histogram ? count : NULL, &restart,
                          &restart_from, &error);
    if (!histogram)
        Py_DECREF(count);
    if (error)
        return NULL;
    if (restart)
        return Py_BuildValue("(LL)", (long long)index, (long long)restart_from);
    return Py_BuildValue("(LO)", (long long)index, Py_None);
}

PyDoc_STRVAR(take_collisions_doc,
"take_collisions() -> list of (tag, step, counts)\n\n"
"The collisions registered since the last call (one per tag and run), in order; their tags\n"
"are then reported.");

static PyObject *Scanner_take_collisions(Scanner *s, PyObject *Py_UNUSED(ignored))
{
    PyObject *taken = s->collisions;
    PyObject *fresh = PyList_New(0);
    if (!fresh)
        return NULL;
    for (Py_ssize_t id = 0; id < s->ntags; id++) {
        if (s->tags[id].registered) {
            s->tags[id].registered = 0;
            s->tags[id].reported = 1;
        }
    }
    s->collisions = fresh;
    return taken;
}

PyDoc_STRVAR(take_tally_doc,
"take_tally() -> (records, events, whats, encodings, file_version, writer)\n\n"
"What the scan read since the last call (bit sets: whats of WHAT_*, encodings of ENCODING_*,\n"
"as ``SHARED`` exports them); then starts afresh.");

static PyObject *Scanner_take_tally(Scanner *s, PyObject *Py_UNUSED(ignored))
{
    PyObject *result = Py_BuildValue("(LLllOO)", (long long)s->records, (long long)s->events,
                                     s->whats, s->encodings,
                                     s->file_version ? s->file_version : Py_None,
                                     s->writer ? s->writer : Py_None);
    if (!result)
        return NULL;
    s->records = s->events = 0;
    s->whats = s->encodings = 0;
    Py_CLEAR(s->file_version);
    Py_CLEAR(s->writer);
    return result;
}

static PyObject *steps_tuple(const Steps *st)
{
    if (!st->seen)
        return Py_BuildValue("(OO)", Py_None, Py_None);
    return Py_BuildValue("(LL)", (long long)st->first_step, (long long)st->last_step);
}

PyDoc_STRVAR(steps_doc,
"steps() -> {tag: ((first, last) of histograms, (first, last) of scalars)}\n\n"
"The first and last step placed per tag ((None, None) when none), to join byte ranges.");

static PyObject *Scanner_steps(Scanner *s, PyObject *Py_UNUSED(ignored))
{
    PyObject *result = PyDict_New();
    for (Py_ssize_t id = 0; result && id < s->ntags; id++) {
        Tag *t = &s->tags[id];
        if (!t->hist.seen && !t->scalar.seen)
            continue;
        PyObject *hist = steps_tuple(&t->hist), *scalar = steps_tuple(&t->scalar);
        PyObject *both = hist && scalar ? PyTuple_Pack(2, hist, scalar) : NULL;
        Py_XDECREF(hist);
        Py_XDECREF(scalar);
        if (!both || PyDict_SetItem(result, t->name, both) < 0) {
            Py_XDECREF(both);
            Py_CLEAR(result);
            break;
        }
        Py_DECREF(both);
    }
    return result;
}

PyDoc_STRVAR(plugins_changed_doc,
"plugins_changed()\n\nThe shared plugin dict was changed by Python: read it again.");

static PyObject *Scanner_plugins_changed(Scanner *s, PyObject *Py_UNUSED(ignored))
{
    s->plugin_generation++;
    Py_RETURN_NONE;
}

static int Scanner_init(Scanner *s, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"plugins", "keep_unknown", NULL};
    PyObject *plugins;
    int keep_unknown = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!|p", kwlist, &PyDict_Type, &plugins,
                                     &keep_unknown))
        return -1;
    if (s->tag_names) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner already initialised");
        return -1;
    }
    Py_INCREF(plugins);
    s->plugins = plugins;
    s->keep_unknown = keep_unknown;
    s->tag_names = PyList_New(0);
    s->collisions = PyList_New(0);
    if (!s->tag_names || !s->collisions)
        return -1;
    return 0;
}

static void Scanner_dealloc(Scanner *s)
{
    for (Py_ssize_t id = 0; id < s->ntags; id++) {
        Py_XDECREF(s->tags[id].name);
        Py_XDECREF(s->tags[id].first_count);
        Py_XDECREF(s->tags[id].collecting);
        PyMem_Free(s->tags[id].bytes);
    }
    PyMem_Free(s->tags);
    PyMem_Free(s->table);
    PyMem_Free(s->values);
    Py_XDECREF(s->plugins);
    Py_XDECREF(s->tag_names);
    Py_XDECREF(s->collisions);
    Py_XDECREF(s->file_version);
    Py_XDECREF(s->writer);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *Scanner_get_tags(Scanner *s, void *Py_UNUSED(closure))
{
    Py_INCREF(s->tag_names);
    return s->tag_names;
}

static PyMethodDef Scanner_methods[] = {
    {"scan", (PyCFunction)Scanner_scan, METH_VARARGS, scan_doc},
    {"place", (PyCFunction)Scanner_place, METH_VARARGS, place_doc},
    {"take_collisions", (PyCFunction)Scanner_take_collisions, METH_NOARGS, take_collisions_doc},
    {"take_tally", (PyCFunction)Scanner_take_tally, METH_NOARGS, take_tally_doc},
    {"plugins_changed", (PyCFunction)Scanner_plugins_changed, METH_NOARGS, plugins_changed_doc},
    {"steps", (PyCFunction)Scanner_steps, METH_NOARGS, steps_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Scanner_getset[] = {
    {"tags", (getter)Scanner_get_tags, NULL, "Tag names by id (a list that grows).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gradcheck._scan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("Scanner(plugins, keep_unknown=False): the state of reading one file "
                        "(or one byte range of it) with the C decoder."),
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
    .tp_getset = Scanner_getset,
};

static PyObject *mod_masked_crc32c(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = masked_crc(buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *mod_crc32c_software(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = crc_sw(buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(c);
}

PyDoc_STRVAR(gather_doc,
"gather(data, rows, starts, sizes, kinds, left, right, counts)\n\n"
"Fill zero-padded [B, width] float64 bucket matrices from the scanned data column: for each\n"
"position i, scanned row ``rows[i]`` (its data at ``starts``, ``sizes`` buckets, ``kinds``).\n"
"Tensor rows hold (left, right, count) triples; histo rows hold the limits then the counts,\n"
"and their left edge j is limit j-1 (column 0 is left for the caller, who knows ``min``).");

static PyObject *mod_gather(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer b[8];
    int got = 0;
    PyObject *result = NULL;
    PyObject *objects[8];
    if (!PyArg_UnpackTuple(args, "gather", 8, 8, &objects[0], &objects[1], &objects[2],
                           &objects[3], &objects[4], &objects[5], &objects[6], &objects[7]))
        return NULL;
    for (; got < 8; got++) {
        int flags = got >= 5 ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(objects[got], &b[got], flags) < 0)
            goto done;
    }
    const double *data = b[0].buf;
    const int64_t *rows = b[1].buf, *starts = b[2].buf;
    const int32_t *sizes = b[3].buf;
    const uint8_t *kinds = b[4].buf;
    double *left = b[5].buf, *right = b[6].buf, *counts = b[7].buf;
    Py_ssize_t ndata = b[0].len / 8, nrows = b[3].len / 4, count = b[1].len / 8;
    if (b[2].len / 8 != nrows || b[4].len != nrows || count == 0 || b[5].len != b[6].len ||
        b[5].len != b[7].len || (b[5].len / 8) % count) {
        PyErr_SetString(PyExc_ValueError, "gather: inconsistent array sizes");
        goto done;
    }
    Py_ssize_t width = b[5].len / 8 / count;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t r = rows[i];
        if (r < 0 || r >= nrows) {
            PyErr_SetString(PyExc_IndexError, "gather: row out of range");
            goto done;
        }
        Py_ssize_t k = sizes[r], s = (Py_ssize_t)starts[r];
        int tensor = kinds[r] == K_TENSOR_HIST;
        if (k < 0 || k > width || s < 0 || s + (tensor ? 3 : 2) * k > ndata) {
            PyErr_SetString(PyExc_IndexError, "gather: bucket data out of range");
            goto done;
        }
        double *l = left + i * width, *rt = right + i * width, *c = counts + i * width;
        if (tensor) {
            for (Py_ssize_t j = 0; j < k; j++) {
                l[j] = data[s + 3 * j];
                rt[j] = data[s + 3 * j + 1];
                c[j] = data[s + 3 * j + 2];
            }
        } else {
            for (Py_ssize_t j = 0; j < k; j++) {
                rt[j] = data[s + j];
                c[j] = data[s + k + j];
                l[j] = j ? data[s + j - 1] : 0.0;
            }
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&b[j]);
    return result;
}


/* ------------------------------------------------------------------------------------------ */
/* Per-histogram statistics and fingerprints (gradcheck/stats.py and series.py, in C)          */
/* ------------------------------------------------------------------------------------------ */

/* stats.histogram_stats_batch on one histogram, zero-padded to its width class as
 * series.batch.reduce_by_width pads it, written as float32 as series.batch._to_float32 writes it;
 * and series.batch._fingerprints. numpy stays the reference: every step below mirrors one numpy
 * expression there, with numpy's NaN rules (np.maximum / np.minimum / np.clip propagate NaN).
 * Sums over buckets use numpy's pairwise order where numpy sums (``.sum``), a plain loop where it
 * uses einsum: those may differ from numpy in the last bits (tests/engine/test_fastpath.py allows a
 * relative 1e-6 on the statistics, nothing on the fingerprints). */

#define N_STATS 25
#define S_COUNT 0
#define S_MIN 1
#define S_MAX 2
#define S_MEAN 3
#define S_STD 4
#define S_L2 5
#define S_BOUND 6
#define S_NONFINITE 7
#define S_ZERO 8
#define S_P01 9
#define S_ACTIVATION 16 /* the nine activation shares, stats._activation_shares */
#define MAX_WEIGHTS 8192
#define FINGERPRINT_MIX 0x9E3779B97F4A7C15ULL

static const double percentile_levels[7] = {0.01, 0.05, 0.25, 0.50, 0.75, 0.95, 0.99};

static double np_max(double a, double b) { return (a >= b || isnan(a)) ? a : b; }
static double np_min(double a, double b) { return (a <= b || isnan(a)) ? a : b; }
static double np_clip(double x, double lo, double hi)
{
    double t = isnan(x) ? x : (x > lo ? x : lo);
    return isnan(t) ? t : (t < hi ? t : hi);
}

static double pairwise(const double *a, Py_ssize_t n)
{
    return pairwise_sum((const uint8_t *)a, n, sizeof(double));
}

/* series.batch._width_class: sizes up to 64 as they are, wider ones rounded up to an eighth of a
 * power of two. */
static Py_ssize_t width_class(Py_ssize_t size)
{
    if (size < 1)
        size = 1;
    if (size <= 64)
        return size;
    int e = 0;
    while (((Py_ssize_t)1 << e) < size)
        e++;
    Py_ssize_t step = (Py_ssize_t)1 << (e - 3 > 0 ? e - 3 : 0);
    return (size + step - 1) / step * step;
}

static inline uint64_t bits_of(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return bits;
}

static inline uint64_t mix(uint64_t bits)
{
    uint64_t m = bits * FINGERPRINT_MIX;
    return m ^ (m >> 29);
}

static uint64_t mixed_bits(double v) { return mix(bits_of(v)); }

typedef struct {
    double *left, *right, *counts, *lo, *hi, *share;
} Buckets;

/* stats._nonfinite_share for one row */
static double nonfinite_share(const Buckets *b, Py_ssize_t w, double total, const double *f,
                              int is_histo)
{
    int has_num = is_histo && isfinite(f[2]) && f[2] > 0;
    double missing = has_num ? f[2] - total : 0.0;
    double num = has_num ? f[2] : 1.0;
    double share = (has_num && missing > 0.5) ? missing / num : NAN;
    int bad = is_histo && (!isfinite(f[0]) || !isfinite(f[1]) || !isfinite(f[3]) ||
                           !isfinite(f[4]));
    for (Py_ssize_t j = 0; j < w && !bad; j++) {
        double l = b->left[j], r = b->right[j];
        bad = isnan(l) || isnan(r) || (!is_histo && (isinf(l) || isinf(r)));
    }
    return bad ? share : 0.0;
}

/* stats._bucket_moments for one row: mean, variance, l2, relative bound. Buckets ``[n, w)``
 * are padding (count 0): each adds +0.0 to the plain-loop sums, except to the variance, where
 * ``0 * (mean^2)`` is NaN when the mean is not finite; that term is the same for every padded
 * bucket, so it is added once. */
static void bucket_moments(Buckets *b, Py_ssize_t n, Py_ssize_t w, double total,
                           double out[4])
{
    double s_mid = 0, s_sq = 0, s_low = 0, s_high = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        double c = b->counts[j], lo = b->lo[j], hi = b->hi[j];
        if (!(c > 0)) /* empty buckets contribute nothing, whatever their edges */
            lo = hi = 0.0;
        double mid = (lo + hi) * 0.5, width = hi - lo;
        double wt = width * width / 12.0;
        b->share[j] = wt; /* for the variance pass: divisions were most of its time */
        s_mid += c * mid;
        s_sq += c * (mid * mid + wt);
        double lo2 = lo * lo, hi2 = hi * hi;
        double low = (lo <= 0 && hi >= 0) ? 0.0 : np_min(lo2, hi2);
        s_low += c * low;
        s_high += c * np_max(lo2, hi2);
    }
    double mean = s_mid / total, s_var = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        double c = b->counts[j], lo = b->lo[j], hi = b->hi[j];
        if (!(c > 0)) /* empty buckets contribute nothing, whatever their edges */
            lo = hi = 0.0;
        double mid = (lo + hi) * 0.5;
        double dev = mid - mean;
        s_var += c * (dev * dev + b->share[j]);
    }
    if (n < w) {
        double dev = 0.0 - mean;
        s_var += 0.0 * (dev * dev + 0.0);
    }
    double l2 = sqrt(s_sq);
    double relative = np_max(sqrt(s_high) - l2, l2 - sqrt(s_low)) / l2;
    out[0] = mean;
    out[1] = s_var / total;
    out[2] = total > 0 ? l2 : NAN;
    out[3] = s_high == 0 ? 0.0 : np_max(relative, 0.0);
}

/* stats._moments_into and the summary columns: mean, std, L2 norm and its error bound (exact
 * from a HistogramProto's num, sum and sum_squares, else from the first ``n`` of ``w``
 * buckets), min, max, count and the non-finite share. Both reduce paths end here. */
static void moments_into(Buckets *b, Py_ssize_t n, Py_ssize_t w, double total,
                         const double *f, int is_histo, double vmin, double vmax,
                         double nonfinite, double *out)
{
    int exact = is_histo && isfinite(f[2]) && isfinite(f[3]) && isfinite(f[4]) && f[2] > 0;
    double mean, variance, l2, bound = 0.0;
    if (exact) {
        mean = f[3] / f[2];
        variance = f[4] / f[2] - mean * mean;
        l2 = sqrt(np_max(f[4], 0.0));
    } else {
        double m[4];
        bucket_moments(b, n, w, total, m);
        mean = m[0], variance = m[1], l2 = m[2], bound = m[3];
    }
    out[S_MEAN] = mean;
    out[S_STD] = np_min(sqrt(np_max(variance, 0.0)), (vmax - vmin) / 2);
    out[S_L2] = l2;
    out[S_BOUND] = bound;
    out[S_MIN] = vmin;
    out[S_MAX] = vmax;
    out[S_COUNT] = (is_histo && isfinite(f[2])) ? f[2] : total;
    out[S_NONFINITE] = nonfinite;
}


/* stats._percentiles for one row, into out[0..6] */
static void percentiles(const Buckets *b, Py_ssize_t w, double total, double vmin, double vmax,
                        double *out)
{
    double denom = total > 0 ? total : 1.0, running = 0;
    for (Py_ssize_t j = 0; j < w; j++) {
        running += b->counts[j];
        b->share[j] = running / denom;
    }
    for (int p = 0; p < 7; p++) {
        double level = percentile_levels[p];
        Py_ssize_t bucket = 0;
        for (Py_ssize_t j = 0; j < w; j++)
            bucket += b->share[j] < level;
        if (bucket > w - 1)
            bucket = w - 1;
        double inside = b->counts[bucket];
        double below = b->share[bucket] - inside / denom;
        double fraction = inside > 0 ? (level - below) * total / inside : 0.0;
        double low = b->lo[bucket], high = b->hi[bucket];
        double value = low + np_clip(fraction, 0.0, 1.0) * (high - low);
        out[p] = total == 0 ? NAN : np_clip(value, vmin, vmax);
    }
}

/* A bucket of a zero-width or straddling edge pair holding 0 (stats._zero_share's test). */
static inline int zero_bucket(double lo, double hi)
{
    return (lo <= 0 && hi > 0) || (lo == 0 && hi == 0);
}

/* stats.region_shares for one row of ``n`` buckets (clipped edges ``lo``/``hi``), for the
 * ``k`` regions ``[start[r], end[r]]`` at once (one pass over the buckets): into ``acc[3 * r]``
 * the estimate, the buckets inside the region, those touching it. A bucket past ``n`` has no
 * density (a padded bucket: zero count, zero width). */
static void region_shares(const double *lo, const double *hi, const double *c, Py_ssize_t n,
                          const double *start, const double *end, int k, double *acc)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        double cj = c[j];
        if (!(cj > 0))
            continue;
        for (int r = 0; r < k; r++) {
            int point = lo[j] == hi[j] && lo[j] >= start[r] && lo[j] <= end[r];
            if (!((lo[j] < end[r] && hi[j] > start[r]) || point))
                continue;
            double *a = acc + 3 * r;
            a[2] += cj;
            if (lo[j] >= start[r] && hi[j] <= end[r]) {
                a[0] += cj;
                a[1] += cj;
                continue;
            }
            double own = cj / (hi[j] - lo[j]);
            double left = j > 0 ? c[j - 1] / (hi[j - 1] - lo[j - 1]) : NAN;
            double right = j + 1 < n ? c[j + 1] / (hi[j + 1] - lo[j + 1]) : NAN;
            if (!(isfinite(left) && left >= 0))
                left = own;
            if (!(isfinite(right) && right >= 0))
                right = own;
            double below = start[r] - lo[j], above = hi[j] - end[r];
            double outside = (below > 0 ? left * below : 0.0) + (above > 0 ? right * above : 0.0);
            a[0] += cj - np_min(cj, outside);
        }
    }
}

#define ZERO_WIDTH 1e-12 /* stats.ZERO_WIDTH */
#define BOUND_MARGIN 0.02 /* stats.BOUND_MARGIN */

/* Whether a bucket clipped to ``[vmin, vmax]`` may touch ``[-ZERO_WIDTH, ZERO_WIDTH]`` (when
 * ``vmin > vmax`` every edge is clipped to ``vmax``). */
static inline int zero_reachable(double vmin, double vmax)
{
    return !((vmin > ZERO_WIDTH || vmax < -ZERO_WIDTH) && vmin <= vmax);
}

/* stats._activation_shares for one row: out[S_ACTIVATION .. +9). The regions: zero, tanh's
 * two, sigmoid's two (those of a share the row's range rules out are left out). */
static void activation_shares(const double *lo, const double *hi, const double *c, Py_ssize_t n,
                              double total, double vmin, double vmax, double *out)
{
    double *o = out + S_ACTIVATION;
    int in_range[3] = {1, vmin >= -1 && vmax <= 1, vmin >= 0 && vmax <= 1};
    static const double starts[5] = {-ZERO_WIDTH, -1.0, 1.0 - 2 * BOUND_MARGIN, 0.0,
                                     1.0 - BOUND_MARGIN};
    static const double ends[5] = {ZERO_WIDTH, -1.0 + 2 * BOUND_MARGIN, 1.0, BOUND_MARGIN, 1.0};
    static const int share_of[5] = {0, 1, 1, 2, 2};
    double start[5], end[5], acc[15] = {0.0};
    int owner[5], k = 0;
    for (int r = 0; r < 5; r++) {
        int wanted = in_range[share_of[r]] && (r > 0 || zero_reachable(vmin, vmax));
        if (wanted) {
            start[k] = starts[r];
            end[k] = ends[r];
            owner[k++] = share_of[r];
        }
    }
    if (k)
        region_shares(lo, hi, c, n, start, end, k, acc);
    double sums[9] = {0.0};
    for (int r = 0; r < k; r++)
        for (int i = 0; i < 3; i++)
            sums[3 * owner[r] + i] += acc[3 * r + i];
    for (int share = 0; share < 3; share++)
        for (int i = 0; i < 3; i++)
            o[3 * share + i] = (in_range[share] && total != 0) ? sums[3 * share + i] / total : NAN;
}

/* Whether a row's activation shares need its clipped edges (activation_shares reads none when
 * no bucket can touch zero and the range is outside [-1, 1]). */
static inline int activation_edges_needed(double vmin, double vmax)
{
    return zero_reachable(vmin, vmax) || (vmin >= -1 && vmax <= 1);
}

/* stats.histogram_stats_batch for one padded row of ``w`` buckets; ``f`` the proto fields
 * (meaningful when ``is_histo``: then all present, else none). */
static void row_stats(Buckets *b, Py_ssize_t w, const double *f, int is_histo, double *out)
{
    /* _collapse_constant_buckets */
    int only_first = b->counts[0] > 0;
    for (Py_ssize_t j = 1; j < w && only_first; j++)
        only_first = b->counts[j] == 0;
    if (only_first && !is_histo && b->right[0] - b->left[0] == 1.0) {
        double middle = (b->left[0] + b->right[0]) / 2;
        b->left[0] = b->right[0] = middle;
    }
    double total = pairwise(b->counts, w);
    double nonfinite = nonfinite_share(b, w, total, f, is_histo);
    /* _effective_edges */
    Py_ssize_t first = -1, last = -1;
    for (Py_ssize_t j = 0; j < w; j++)
        if (b->counts[j] > 0) {
            if (first < 0)
                first = j;
            last = j;
        }
    double bucket_min = first >= 0 ? b->left[first] : NAN;
    double bucket_max = first >= 0 ? b->right[last] : NAN;
    if (isinf(bucket_min) && bucket_min < 0)
        bucket_min = b->right[first];
    int use_min = is_histo && isfinite(f[0]), use_max = is_histo && isfinite(f[1]);
    double vmin = use_min ? f[0] : bucket_min, vmax = use_max ? f[1] : bucket_max;
    double finite_min = isfinite(vmin) ? vmin : -INFINITY;
    double finite_max = isfinite(vmax) ? vmax : INFINITY;
    for (Py_ssize_t j = 0; j < w; j++) {
        double lo = np_clip(b->left[j], finite_min, finite_max);
        double hi = np_clip(b->right[j], finite_min, finite_max);
        if (isinf(lo) && lo < 0)
            lo = hi;
        b->lo[j] = np_min(lo, hi);
        b->hi[j] = hi;
    }
    if (first < 0) {
        if (!use_min)
            vmin = NAN;
        if (!use_max)
            vmax = NAN;
    }
    moments_into(b, w, w, total, f, is_histo, vmin, vmax, nonfinite, out);
    for (Py_ssize_t j = 0; j < w; j++)
        b->share[j] = b->counts[j] * (double)zero_bucket(b->lo[j], b->hi[j]);
    out[S_ZERO] = pairwise(b->share, w) / total;
    percentiles(b, w, total, vmin, vmax, out + S_P01);
    activation_shares(b->lo, b->hi, b->counts, w, total, vmin, vmax, out);
    int finite_left = 1; /* TF2 edges of a NaN/Inf tensor: nothing usable */
    for (Py_ssize_t j = 0; j < w && finite_left; j++)
        finite_left = isfinite(b->left[j]);
    if (!is_histo && !finite_left) {
        for (int s = S_MEAN; s < N_STATS; s++)
            out[s] = NAN;
        out[S_NONFINITE] = nonfinite;
    }
    if (total == 0)
        out[S_ZERO] = NAN;
}

static float to_float32(double v)
{
    if (isfinite(v)) {
        if (v > FLT_MAX)
            v = FLT_MAX;
        else if (v < -FLT_MAX)
            v = -FLT_MAX;
    }
    return (float)v;
}

/* What the fill pass learns about a row, so that the statistics pass need not look again. */
typedef struct {
    Py_ssize_t n;      /* buckets written: max(size, 1); the padded tail [n, w) is implicit */
    Py_ssize_t first;  /* first and last bucket with count > 0, -1 when none */
    Py_ssize_t last;
    int only_first;    /* counts[0] > 0 and every other count == 0 */
    int edges_bad;     /* some edge NaN (tensor: or infinite) */
    int left_finite;   /* every left edge finite, the padded tail's included */
    int plain_counts;  /* every count finite and >= 0: cumulative shares never decrease */
    int finite;        /* every written edge and count finite */
    double edge;       /* the padded tail's left and right edge (the last right edge) */
} RowScan;

/* series.batch._fingerprints of a filled row: a weighted sum of every value's mixed bits. A histo
 * row's left edges are its right edges shifted by one: their mixed bits are reused.
 * ``*odd`` gets bit 63 set when some written edge or count is not finite (all exponent bits
 * set: adding one to the exponent carries into bit 63) or some count has its sign bit set
 * (negative, or -0.0): rows without either need no per-value flags (row_flags). */
static uint64_t row_fingerprint(const Buckets *b, Py_ssize_t n, Py_ssize_t size, int tensor,
                                const double *f, const uint64_t *weights, uint64_t *odd)
{
    const uint64_t *wl = weights, *wr = weights + MAX_WEIGHTS, *wc = weights + 2 * MAX_WEIGHTS;
    const uint64_t exponent = 0x7FF0000000000000ULL, unit = 0x0010000000000000ULL;
    uint64_t total = 0, seen = 0;
    if (tensor) {
        for (Py_ssize_t j = 0; j < n; j++) {
            uint64_t lb = bits_of(b->left[j]), rb = bits_of(b->right[j]);
            uint64_t cb = bits_of(b->counts[j]);
            seen |= ((lb & exponent) + unit) | ((rb & exponent) + unit) |
                    ((cb & exponent) + unit) | cb;
            total += mix(lb) * wl[j] + mix(rb) * wr[j] + mix(cb) * wc[j];
        }
    } else {
        uint64_t lb = bits_of(b->left[0]), previous = mix(lb); /* left[j] == right[j - 1] */
        seen = (lb & exponent) + unit;
        for (Py_ssize_t j = 0; j < n; j++) {
            uint64_t rb = bits_of(b->right[j]), cb = bits_of(b->counts[j]);
            seen |= ((rb & exponent) + unit) | ((cb & exponent) + unit) | cb;
            uint64_t right = mix(rb);
            total += previous * wl[j] + right * wr[j] + mix(cb) * wc[j];
            previous = right;
        }
        for (int i = 0; i < 5; i++)
            total += mixed_bits(f[i]) * weights[3 * MAX_WEIGHTS + i];
    }
    *odd = seen;
    return total + (uint64_t)size * FINGERPRINT_MIX;
}

/* ``finite``, ``edges_bad``, ``left_finite`` and ``plain_counts`` of the written buckets:
 * at once when row_fingerprint saw nothing odd, else value by value. */
static void row_flags(const Buckets *b, Py_ssize_t n, int tensor, uint64_t odd, RowScan *scan)
{
    scan->finite = !(odd >> 63);
    if (scan->finite) {
        scan->edges_bad = 0;
        scan->left_finite = 1;
        scan->plain_counts = 1;
        return;
    }
    int bad = 0, infinite = 0, left_finite = 1, plain = 1, finite = 1;
    for (Py_ssize_t j = 0; j < n; j++) {
        double l = b->left[j], r = b->right[j], c = b->counts[j];
        plain &= c >= 0 && c <= DBL_MAX;
        bad |= isnan(l) || isnan(r);
        infinite |= isinf(l) || isinf(r);
        left_finite &= isfinite(l) != 0;
        finite &= isfinite(c) != 0;
    }
    scan->finite = finite && !bad && !infinite;
    scan->edges_bad = bad || (tensor && infinite);
    scan->left_finite = left_finite;
    scan->plain_counts = plain;
}

/* A HistogramProto row's first left edge, as decode.first_left_edges derives it from ``min``,
 * the first right edge and the first count. */
static double first_left_edge(double minimum, double right, double count)
{
    return minimum <= right ? minimum : (count == 0 ? right : -INFINITY);
}

/* Fill ``b`` with scanned row ``s`` of ``size`` buckets as the numpy engine's matrices hold it
 * (histo: first left edge from ``min`` as decode.first_left_edges derives it), and learn its
 * ``RowScan`` (row_fingerprint's pass, short scans from either end). Only the ``n`` written buckets are stored, plus zero counts up to
 * ``w`` (pairwise sums run over the padded width): the padded tail, whose edges repeat the
 * last right edge as series._reduce_group pads, is handled arithmetically (see row_stats_fast)
 * or written by pad_edges. Returns the fingerprint (of the zero-padded row). */
static uint64_t fill_row(Buckets *b, const double *data, Py_ssize_t s, Py_ssize_t size,
                         Py_ssize_t w, int tensor, const double *f, const uint64_t *weights,
                         RowScan *scan)
{
    Py_ssize_t n = size > 0 ? size : 1;
    double *left = b->left, *right = b->right, *counts = b->counts;
    if (size == 0) {
        left[0] = right[0] = counts[0] = 0.0;
    } else if (tensor) {
        const double *d = data + s;
        for (Py_ssize_t j = 0; j < size; j++) {
            left[j] = d[3 * j];
            right[j] = d[3 * j + 1];
            counts[j] = d[3 * j + 2];
        }
    } else {
        memcpy(right, data + s, (size_t)size * sizeof(double));
        memcpy(counts, data + s + size, (size_t)size * sizeof(double));
        memcpy(left + 1, data + s, (size_t)(size - 1) * sizeof(double));
    }
    if (!tensor)
        left[0] = first_left_edge(f[0], right[0], counts[0]);
    for (Py_ssize_t j = n; j < w; j++)
        counts[j] = 0.0;
    uint64_t odd;
    uint64_t total = row_fingerprint(b, n, size, tensor, f, weights, &odd);
    row_flags(b, n, tensor, odd, scan);
    /* first and last non-empty bucket, last non-zero count: short scans from either end */
    Py_ssize_t first = 0, last = n - 1, nonzero = n - 1;
    while (first < n && !(counts[first] > 0))
        first++;
    while (last >= 0 && !(counts[last] > 0))
        last--;
    while (nonzero > 0 && counts[nonzero] == 0)
        nonzero--;
    scan->n = n;
    scan->first = first < n ? first : -1;
    scan->last = last;
    scan->only_first = counts[0] > 0 && nonzero == 0;
    scan->edge = right[n - 1];
    scan->left_finite &= n == w || isfinite(scan->edge);
    return total;
}

/* Write the padded tail's edges, for row_stats (which reads all ``w`` buckets). */
static void pad_edges(Buckets *b, const RowScan *scan, Py_ssize_t w)
{
    for (Py_ssize_t j = scan->n; j < w; j++)
        b->left[j] = b->right[j] = scan->edge;
}

/* One bucket's edges clipped to ``[fmin, fmax]`` as stats._effective_edges clips them. */
static inline void clip_bucket(double l, double r, double fmin, double fmax, double *lo,
                               double *hi)
{
    double a = np_clip(l, fmin, fmax), z = np_clip(r, fmin, fmax);
    if (isinf(a) && a < 0)
        a = z;
    *lo = np_min(a, z);
    *hi = z;
}

/* clip_bucket for finite edges (``fmin``/``fmax`` are never NaN): the same comparisons. */
static inline void clip_finite(double l, double r, double fmin, double fmax, double *lo,
                               double *hi)
{
    double a = l > fmin ? l : fmin, z = r > fmin ? r : fmin;
    a = a < fmax ? a : fmax;
    z = z < fmax ? z : fmax;
    *lo = a <= z ? a : z;
    *hi = z;
}

/* Sum of ``b->share[0 .. n)`` padded with zeros to ``w``, in numpy's pairwise order. */
static double padded_pairwise(Buckets *b, Py_ssize_t n, Py_ssize_t w)
{
    for (Py_ssize_t j = n; j < w; j++)
        b->share[j] = 0.0;
    return pairwise(b->share, w);
}

/* ``reach[p]``: a running total below it has ``running / denom < percentile_levels[p]`` for
 * sure (rounding moves the quotient by 1e-16 relative, the margin is 1e-9), so the fused pass
 * divides only near a level, not per bucket. -inf (always divide) when ``denom`` is too far
 * from 1 for the margin to hold; ``reach[7]`` +inf: no level left. */
static void share_thresholds(double denom, double reach[8])
{
    int safe = denom >= 1e-250 && denom <= 1e250;
    for (int p = 0; p < 7; p++)
        reach[p] = safe ? percentile_levels[p] * denom * (1.0 - 1e-9) : -INFINITY;
    reach[7] = INFINITY;
}

/* The data's range (stats._effective_edges): ``vmin``/``vmax`` as reported, and the finite
 * bounds ``fmin``/``fmax`` the edges are clipped to. */
typedef struct {
    double vmin, vmax, fmin, fmax;
} Range;

static Range row_range(const Buckets *b, const RowScan *scan, const double *f, int is_histo)
{
    Py_ssize_t first = scan->first, last = scan->last;
    double bucket_min = first >= 0 ? b->left[first] : NAN;
    double bucket_max = first >= 0 ? b->right[last] : NAN;
    if (isinf(bucket_min) && bucket_min < 0)
        bucket_min = b->right[first];
    int use_min = is_histo && isfinite(f[0]), use_max = is_histo && isfinite(f[1]);
    Range r = {use_min ? f[0] : bucket_min, use_max ? f[1] : bucket_max, 0.0, 0.0};
    r.fmin = isfinite(r.vmin) ? r.vmin : -INFINITY;
    r.fmax = isfinite(r.vmax) ? r.vmax : INFINITY;
    if (first < 0) {
        if (!use_min)
            r.vmin = NAN;
        if (!use_max)
            r.vmax = NAN;
    }
    return r;
}

/* What the fused pass finds: each percentile level's bucket and cumulative share there, and
 * the zero bucket's count. */
typedef struct {
    Py_ssize_t bucket[7];
    double share[7];
    double zero_sum;
} Fused;

/* The levels the running total ``running`` (bucket ``j``) reaches, from level ``*p`` on: each
 * gets the bucket and the share there; returns the next total worth a division. */
static inline double reach_levels(double running, double denom, Py_ssize_t j,
                                  const double reach[8], int *p, Fused *out)
{
    double share = running / denom; /* near or past level p: divide as numpy does */
    while (*p < 7 && !(share < percentile_levels[*p])) {
        out->bucket[*p] = j;
        out->share[*p] = share;
        (*p)++;
    }
    return reach[*p];
}

/* The levels no share reached: the last bucket of the padded width, the final share. */
static void unreached_levels(double running, double denom, Py_ssize_t w, int p, Fused *out)
{
    for (; p < 7; p++) {
        out->bucket[p] = w - 1;
        out->share[p] = running / denom;
    }
}

/* The fused pass over the ``n`` written buckets: clipped edges (into ``b->lo``/``b->hi``),
 * zero-bucket counts, and the cumulative shares' percentile buckets. Cumulative shares never
 * decrease (counts >= 0; once the running total overflows it stays +inf), so "how many shares
 * are below the level" (numpy's count, clipped to ``w - 1``) is the first bucket whose share
 * is not, found for all seven levels in this one pass; the padded tail's shares all equal the
 * last one. The zero share is numpy's pairwise sum of ``count * is_zero_bucket`` over ``w``:
 * with at most one non-zero term that is the term itself, else it is summed pairwise. */
static void fused_pass(Buckets *b, const RowScan *scan, Py_ssize_t w, Range r, double total,
                       Fused *out)
{
    Py_ssize_t n = scan->n, zero_terms = 0;
    double denom = total > 0 ? total : 1.0, running = 0.0, zero_sum = 0.0, reach[8];
    share_thresholds(denom, reach);
    double next = reach[0];
    int p = 0, finite = scan->finite;
    for (Py_ssize_t j = 0; j < n; j++) {
        double lo, hi, c = b->counts[j];
        if (finite) /* np_clip without its NaN cases, np_min without its NaN case */
            clip_finite(b->left[j], b->right[j], r.fmin, r.fmax, &lo, &hi);
        else
            clip_bucket(b->left[j], b->right[j], r.fmin, r.fmax, &lo, &hi);
        b->lo[j] = lo;
        b->hi[j] = hi;
        if (zero_bucket(lo, hi) && c > 0) {
            zero_sum = c;
            zero_terms++;
        }
        running += c;
        if (running >= next)
            next = reach_levels(running, denom, j, reach, &p, out);
    }
    unreached_levels(running, denom, w, p, out);
    if (zero_terms > 1) { /* several zero buckets (zero-width or overlapping) */
        for (Py_ssize_t j = 0; j < n; j++)
            b->share[j] = b->counts[j] * (double)zero_bucket(b->lo[j], b->hi[j]);
        zero_sum = padded_pairwise(b, n, w);
    }
    out->zero_sum = zero_sum;
}

/* stats._percentiles from the fused pass's buckets, into out[0..6]. A bucket in the padded
 * tail (count 0) has the last right edge, clipped, as both edges. */
static void fast_percentiles(const Buckets *b, const RowScan *scan, const Fused *fused,
                             Range r, double total, double *out)
{
    double denom = total > 0 ? total : 1.0, tail_lo, tail_hi;
    clip_bucket(scan->edge, scan->edge, r.fmin, r.fmax, &tail_lo, &tail_hi);
    for (int q = 0; q < 7; q++) {
        Py_ssize_t j = fused->bucket[q];
        int in_tail = j >= scan->n;
        double inside = in_tail ? 0.0 : b->counts[j];
        double below = fused->share[q] - inside / denom;
        double fraction = inside > 0 ? (percentile_levels[q] - below) * total / inside : 0.0;
        double low = in_tail ? tail_lo : b->lo[j], high = in_tail ? tail_hi : b->hi[j];
        double value = low + np_clip(fraction, 0.0, 1.0) * (high - low);
        out[q] = total == 0 ? NAN : np_clip(value, r.vmin, r.vmax);
    }
}

/* row_stats for a row whose counts are all finite and >= 0 (``scan->plain_counts``): one
 * fused pass over the ``n`` written buckets instead of ten over the padded width ``w``, with
 * the same results as row_stats, bit for bit. The padded tail (count 0, edges
 * ``scan->edge``) adds +0.0 to every plain-loop sum and never holds a first/last bucket;
 * sums numpy takes pairwise (total, zero share) still run over the zero-padded width. */
static void row_stats_fast(Buckets *b, const RowScan *scan, Py_ssize_t w, const double *f,
                           int is_histo, double *out)
{
    if (scan->only_first && !is_histo && b->right[0] - b->left[0] == 1.0) {
        double middle = (b->left[0] + b->right[0]) / 2; /* _collapse_constant_buckets */
        b->left[0] = b->right[0] = middle;
    }
    double total = pairwise(b->counts, w);
    int has_num = is_histo && isfinite(f[2]) && f[2] > 0;
    double missing = has_num ? f[2] - total : 0.0;
    double share_missing = (has_num && missing > 0.5) ? missing / f[2] : NAN;
    int bad = scan->edges_bad || (is_histo && (!isfinite(f[0]) || !isfinite(f[1]) ||
                                               !isfinite(f[3]) || !isfinite(f[4])));
    double nonfinite = bad ? share_missing : 0.0;
    Range r = row_range(b, scan, f, is_histo);
    Fused fused;
    fused_pass(b, scan, w, r, total, &fused);
    moments_into(b, scan->n, w, total, f, is_histo, r.vmin, r.vmax, nonfinite, out);
    out[S_ZERO] = total == 0 ? NAN : fused.zero_sum / total;
    fast_percentiles(b, scan, &fused, r, total, out + S_P01);
    activation_shares(b->lo, b->hi, b->counts, scan->n, total, r.vmin, r.vmax, out);
    if (!is_histo && !scan->left_finite) { /* TF2 edges of a NaN/Inf tensor: nothing usable */
        for (int s = S_MEAN; s < N_STATS; s++)
            out[s] = NAN;
        out[S_NONFINITE] = nonfinite;
    }
}

/* A HistogramProto row with every field finite and ``num`` > 0, read where the scanner left
 * it (``data + s``: ``size`` right edges, then ``size`` counts): fill_row and row_stats_fast
 * in one pass over the buckets, the edges not copied into ``b`` (the counts are, padded to
 * ``w`` for the pairwise total). Its moments, minimum, maximum and count come from the fields,
 * so the buckets give only the fingerprint, the zero bucket and the percentile buckets, all
 * found by that pass (the percentile buckets' clipped edges are then computed again).
 * The same results, bit for bit: the fingerprint's terms are summed modulo 2^64, where order
 * does not matter, and every floating-point step is the same in the same order. Returns 0,
 * with nothing written to ``out`` or ``*fingerprint``, when the row is not plain (an edge or
 * a count not finite, a count negative or -0.0: row_fingerprint's ``odd``) or has several
 * zero buckets: fill_row and the kernels take it then. Faster than the two passes on the bench's
 * PyTorch logs (bench/reduce_speed.py; the figures are in bench/README.md). */
static int histo_row_direct(Buckets *b, const double *data, Py_ssize_t s, Py_ssize_t size,
                            Py_ssize_t w, const double *f, const uint64_t *weights,
                            uint64_t *fingerprint, double *out)
{
    for (int i = 0; i < 5; i++)
        if (!isfinite(f[i]))
            return 0;
    if (size < 1 || !(f[2] > 0))
        return 0;
    const double *right = data + s;
    double *counts = b->counts;
    memcpy(counts, data + s + size, (size_t)size * sizeof(double));
    for (Py_ssize_t j = size; j < w; j++)
        counts[j] = 0.0;
    double total = pairwise(counts, w);
    double first = first_left_edge(f[0], right[0], counts[0]);
    const uint64_t *wl = weights, *wr = weights + MAX_WEIGHTS, *wc = weights + 2 * MAX_WEIGHTS;
    const uint64_t exponent = 0x7FF0000000000000ULL, unit = 0x0010000000000000ULL;
    uint64_t lb = bits_of(first), previous = mix(lb), seen = (lb & exponent) + unit, sum = 0;
    Range r = {f[0], f[1], f[0], f[1]}; /* row_range with both limits finite */
    double denom = total > 0 ? total : 1.0, running = 0.0, left = first, reach[8];
    share_thresholds(denom, reach);
    double next = reach[0];
    Fused fused = {.zero_sum = 0.0};
    Py_ssize_t zero_terms = 0;
    int p = 0;
    for (Py_ssize_t j = 0; j < size; j++) {
        double edge = right[j], c = counts[j], lo, hi;
        uint64_t rb = bits_of(edge), cb = bits_of(c), mixed = mix(rb);
        seen |= ((rb & exponent) + unit) | ((cb & exponent) + unit) | cb;
        sum += previous * wl[j] + mixed * wr[j] + mix(cb) * wc[j];
        previous = mixed;
        clip_finite(left, edge, r.fmin, r.fmax, &lo, &hi);
        if (zero_bucket(lo, hi) && c > 0) {
            fused.zero_sum = c;
            zero_terms++;
        }
        running += c;
        if (running >= next)
            next = reach_levels(running, denom, j, reach, &p, &fused);
        left = edge;
    }
    if (seen >> 63 || zero_terms > 1)
        return 0;
    unreached_levels(running, denom, w, p, &fused);
    for (int i = 0; i < 5; i++)
        sum += mixed_bits(f[i]) * weights[3 * MAX_WEIGHTS + i];
    *fingerprint = sum + (uint64_t)size * FINGERPRINT_MIX;
    for (int q = 0; q < 7; q++) { /* the clipped edges fast_percentiles reads */
        Py_ssize_t j = fused.bucket[q];
        if (j < size)
            clip_finite(j > 0 ? right[j - 1] : first, right[j], r.fmin, r.fmax, &b->lo[j],
                        &b->hi[j]);
    }
    RowScan scan = {.n = size, .edge = right[size - 1]};
    moments_into(b, size, w, total, f, 1, r.vmin, r.vmax, 0.0, out);
    out[S_ZERO] = total == 0 ? NAN : fused.zero_sum / total;
    fast_percentiles(b, &scan, &fused, r, total, out + S_P01);
    if (activation_edges_needed(r.vmin, r.vmax))
        for (Py_ssize_t j = 0; j < size; j++)
            clip_finite(j > 0 ? right[j - 1] : first, right[j], r.fmin, r.fmax, &b->lo[j],
                        &b->hi[j]);
    activation_shares(b->lo, b->hi, counts, size, total, r.vmin, r.vmax, out);
    return 1;
}

PyDoc_STRVAR(reduce_doc,
"reduce(data, rows, starts, sizes, kinds, fields, weights, stats, fingerprints)\n\n"
"Statistics (float32 [B, 25], stats.STAT_NAMES) and 64-bit fingerprints (uint64 [B]) of the\n"
"scanned histograms ``rows`` (see gather), as series.batch.reduce_by_width computes them with\n"
"numpy; ``fields`` [rows, 5] the histo rows' proto fields, ``weights`` uint64 [4, 8192] the\n"
"fingerprint weights. Histograms wider than 8192 buckets are refused (ValueError).");

static PyObject *mod_reduce(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer b[9];
    int got = 0;
    PyObject *result = NULL;
    PyObject *objects[9];
    double *scratch = NULL;
    if (!PyArg_UnpackTuple(args, "reduce", 9, 9, &objects[0], &objects[1], &objects[2],
                           &objects[3], &objects[4], &objects[5], &objects[6], &objects[7],
                           &objects[8]))
        return NULL;
    for (; got < 9; got++) {
        int flags = got >= 7 ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(objects[got], &b[got], flags) < 0)
            goto done;
    }
    const double *data = b[0].buf, *fields = b[5].buf;
    const int64_t *rows = b[1].buf, *starts = b[2].buf;
    const int32_t *sizes = b[3].buf;
    const uint8_t *kinds = b[4].buf;
    const uint64_t *weights = b[6].buf;
    float *stats = b[7].buf;
    uint64_t *fingerprints = b[8].buf;
    Py_ssize_t ndata = b[0].len / 8, nrows = b[3].len / 4, count = b[1].len / 8;
    if (b[2].len / 8 != nrows || b[4].len != nrows || b[5].len != nrows * 5 * 8 ||
        b[6].len != 4 * MAX_WEIGHTS * 8 || b[7].len != count * N_STATS * 4 ||
        b[8].len != count * 8) {
        PyErr_SetString(PyExc_ValueError, "reduce: inconsistent array sizes");
        goto done;
    }
    scratch = PyMem_Malloc(6 * MAX_WEIGHTS * sizeof(double));
    if (!scratch) {
        PyErr_NoMemory();
        goto done;
    }
    Buckets bk = {scratch, scratch + MAX_WEIGHTS, scratch + 2 * MAX_WEIGHTS,
                  scratch + 3 * MAX_WEIGHTS, scratch + 4 * MAX_WEIGHTS, scratch + 5 * MAX_WEIGHTS};
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t r = rows[i];
        if (r < 0 || r >= nrows) {
            PyErr_SetString(PyExc_IndexError, "reduce: row out of range");
            goto done;
        }
        Py_ssize_t k = sizes[r], s = (Py_ssize_t)starts[r];
        int tensor = kinds[r] == K_TENSOR_HIST;
        if (k < 0 || s < 0 || s + (tensor ? 3 : 2) * k > ndata) {
            PyErr_SetString(PyExc_IndexError, "reduce: bucket data out of range");
            goto done;
        }
        Py_ssize_t w = width_class(k);
        if (w > MAX_WEIGHTS) {
            PyErr_SetString(PyExc_ValueError, "reduce: histogram wider than 8192 buckets");
            goto done;
        }
        const double *f = fields + 5 * r;
        double out[N_STATS];
        for (int j = 0; j < N_STATS; j++)
            out[j] = NAN;
        if (tensor || !histo_row_direct(&bk, data, s, k, w, f, weights, &fingerprints[i], out)) {
            RowScan scan;
            fingerprints[i] = fill_row(&bk, data, s, k, w, tensor, f, weights, &scan);
            if (scan.plain_counts) {
                row_stats_fast(&bk, &scan, w, f, !tensor, out);
            } else { /* negative or NaN/Inf counts: the general kernel, over the padded width */
                pad_edges(&bk, &scan, w);
                row_stats(&bk, w, f, !tensor, out);
            }
        }
        for (int j = 0; j < N_STATS; j++)
            stats[i * N_STATS + j] = to_float32(out[j]);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(scratch);
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&b[j]);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* Thinning a long histogram series (series._thinned and series._kept_rows, in C)              */
/* ------------------------------------------------------------------------------------------ */

/* log2 of a power of two */
static inline int shift_of(int64_t window)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll((unsigned long long)window);
#else
    int k = 0;
    while (((int64_t)1 << k) < window)
        k++;
    return k;
#endif
}

/* The window of ``step``: floor(step / window), as numpy's ``//`` (steps may be negative).
 * Windows are powers of two (they start at 1 and double): a shift then, not a division, which
 * took most of the time; negative steps shifted as non-negative ones, no implementation-defined
 * shift of a negative value. */
static inline int64_t window_of(int64_t step, int64_t window)
{
    if ((window & (window - 1)) == 0) {
        int k = shift_of(window);
        return step >= 0 ? step >> k : -((-(step + 1)) >> k) - 1;
    }
    int64_t q = step / window;
    return (step % window != 0 && step < 0) ? q - 1 : q;
}

/* How bad a row is: +inf when its norm or its values are not finite, else its L2 norm. */
static inline float badness(const float *row, int l2_column, int nonfinite_column)
{
    float norm = row[l2_column];
    return (row[nonfinite_column] != 0.0f || !isfinite(norm)) ? INFINITY : norm;
}

/* series._kept_rows: the first row of each window, and its earliest worst row when that is
 * another. Writes rising positions to ``kept``; returns how many. */
static Py_ssize_t kept_rows(const int64_t *steps, const float *stats, Py_ssize_t n, int width,
                            int l2_column, int nonfinite_column, int64_t window, int64_t *kept)
{
    Py_ssize_t count = 0, i = 0;
    while (i < n) {
        int64_t current = window_of(steps[i], window);
        Py_ssize_t worst = i;
        float worst_badness = badness(stats + i * width, l2_column, nonfinite_column);
        kept[count++] = i;
        for (i++; i < n && window_of(steps[i], window) == current; i++) {
            float b = badness(stats + i * width, l2_column, nonfinite_column);
            if (b > worst_badness) {
                worst_badness = b;
                worst = i;
            }
        }
        if (worst != kept[count - 1])
            kept[count++] = worst;
    }
    return count;
}

PyDoc_STRVAR(thin_doc,
"thin(steps, stats, l2_column, nonfinite_column, window, limit, kept) -> (count, window)\n\n"
"series._thinned_rows: ``steps`` int64 [n] rising, ``stats`` float32 [n, 25]; the window\n"
"doubled from ``window`` (2 at least) until the rows kept (series._kept_rows) fit ``limit`` as\n"
"series._fits counts them. Writes the kept positions to ``kept`` (int64 [n]) and returns their\n"
"count and the window.");

static PyObject *mod_thin(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer steps_buffer, stats_buffer, kept_buffer;
    int l2_column, nonfinite_column;
    long long window, limit;
    if (!PyArg_ParseTuple(args, "y*y*iiLLw*", &steps_buffer, &stats_buffer, &l2_column,
                          &nonfinite_column, &window, &limit, &kept_buffer))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = steps_buffer.len / 8, count = 0;
    const int width = N_STATS;
    int columns_ok = l2_column >= 0 && l2_column < width && nonfinite_column >= 0 &&
                     nonfinite_column < width;
    if (steps_buffer.len % 8 || stats_buffer.len != (Py_ssize_t)width * n * 4 ||
        kept_buffer.len != n * 8 || !columns_ok || window < 1 || limit < 1) {
        PyErr_SetString(PyExc_ValueError, "thin: inconsistent arguments");
        goto done;
    }
    const int64_t *steps = steps_buffer.buf;
    const float *stats = stats_buffer.buf;
    int64_t *kept = kept_buffer.buf;
    for (;; window *= 2) {
        if (window > 1) { /* thinning at window 1 would keep every row */
            Py_ssize_t windows = n ? 1 : 0;
            for (Py_ssize_t i = 1; i < n; i++)
                windows += window_of(steps[i], window) != window_of(steps[i - 1], window);
            if (windows <= limit) { /* else too many: each window keeps a row at least */
                count = kept_rows(steps, stats, n, width, l2_column, nonfinite_column, window,
                                  kept);
                int first_window_has_two = count > 1 && window_of(steps[kept[1]], window) ==
                                                            window_of(steps[kept[0]], window);
                if (count - first_window_has_two <= limit) /* series._fits */
                    break;
            }
        }
        if (window > ((int64_t)1 << 61)) { /* only with a limit below 3 */
            PyErr_SetString(PyExc_ValueError, "thin: no window fits the limit");
            goto done;
        }
    }
    result = Py_BuildValue("(nL)", count, window);
done:
    PyBuffer_Release(&steps_buffer);
    PyBuffer_Release(&stats_buffer);
    PyBuffer_Release(&kept_buffer);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* Wasserstein-1 distances between quantile grids (stats.wasserstein_from_quantiles)           */
/* ------------------------------------------------------------------------------------------ */

#define GRID_LEVELS 9

PyDoc_STRVAR(wasserstein_doc,
"wasserstein(grid_a, grid_b, widths, out)\n\n"
"stats.wasserstein_from_quantiles of n grids of 9 float64 levels (``grid_a`` [n, 9]; ``grid_b``\n"
"[n, 9], or [9] for every row), ``widths`` the 8 level widths, into ``out`` (float64 [n]): the\n"
"same operations in numpy's order, bit for bit (its sum of a row of eight is pairwise).");

static PyObject *mod_wasserstein(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer a_buffer, b_buffer, widths_buffer, out_buffer;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &a_buffer, &b_buffer, &widths_buffer, &out_buffer))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t row = GRID_LEVELS * (Py_ssize_t)sizeof(double);
    Py_ssize_t n = out_buffer.len / (Py_ssize_t)sizeof(double);
    int one_b = b_buffer.len == row;
    if (out_buffer.len % (Py_ssize_t)sizeof(double) || a_buffer.len != n * row ||
        widths_buffer.len != (GRID_LEVELS - 1) * (Py_ssize_t)sizeof(double) ||
        (!one_b && b_buffer.len != a_buffer.len)) {
        PyErr_SetString(PyExc_ValueError, "wasserstein: inconsistent arguments");
        goto done;
    }
    const double *a = a_buffer.buf, *b = b_buffer.buf, *widths = widths_buffer.buf;
    double *out = out_buffer.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        const double *ai = a + i * GRID_LEVELS, *bi = one_b ? b : b + i * GRID_LEVELS;
        double d[GRID_LEVELS], t[GRID_LEVELS - 1];
        for (int j = 0; j < GRID_LEVELS; j++)
            d[j] = fabs(ai[j] - bi[j]);
        for (int j = 0; j < GRID_LEVELS - 1; j++)
            t[j] = (d[j + 1] + d[j]) / 2.0 * widths[j];
        out[i] = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&a_buffer);
    PyBuffer_Release(&b_buffer);
    PyBuffer_Release(&widths_buffer);
    PyBuffer_Release(&out_buffer);
    return result;
}

static PyMethodDef module_methods[] = {
    {"reduce", mod_reduce, METH_VARARGS, reduce_doc},
    {"gather", mod_gather, METH_VARARGS, gather_doc},
    {"thin", mod_thin, METH_VARARGS, thin_doc},
    {"wasserstein", mod_wasserstein, METH_VARARGS, wasserstein_doc},
    {"masked_crc32c", mod_masked_crc32c, METH_O,
     "The TFRecord checksum of a bytes-like object (CRC32C, rotated, plus a constant)."},
    {"crc32c_software", mod_crc32c_software, METH_O,
     "Plain CRC32C with the table implementation (to test it against the instruction)."},
    {NULL, NULL, 0, NULL},
};

/* The numbers Python shares with this file, exported as ``SHARED`` (a dict) so that
 * tests/engine/test_twin_contract.py checks each against its one Python definition
 * (gradcheck/native/shared.py says where each is). */
static const struct {
    const char *name;
    unsigned long long value;
} shared_numbers[] = {
    {"STOP_FULL", STOP_FULL},
    {"STOP_MORE", STOP_MORE},
    {"STOP_DAMAGE", STOP_DAMAGE},
    {"STOP_FALLBACK", STOP_FALLBACK},
    {"STOP_LIMIT", STOP_LIMIT},
    {"K_HISTO", K_HISTO},
    {"K_TENSOR_HIST", K_TENSOR_HIST},
    {"K_SIMPLE", K_SIMPLE},
    {"K_TENSOR_SCALAR", K_TENSOR_SCALAR},
    {"FLAG_RESTART", FLAG_RESTART},
    {"FLAG_PENDING", FLAG_PENDING},
    {"WHAT_NONE", WHAT_NONE},
    {"WHAT_FILE_VERSION", WHAT_FILE_VERSION},
    {"WHAT_SUMMARY", WHAT_SUMMARY},
    {"ENCODING_HISTO", ENCODING_HISTO},
    {"ENCODING_TENSOR", ENCODING_TENSOR},
    {"ENCODING_SIMPLE_VALUE", ENCODING_SIMPLE_VALUE},
    {"N_STATS", N_STATS},
    {"S_COUNT", S_COUNT},
    {"S_MIN", S_MIN},
    {"S_MAX", S_MAX},
    {"S_MEAN", S_MEAN},
    {"S_STD", S_STD},
    {"S_L2", S_L2},
    {"S_BOUND", S_BOUND},
    {"S_NONFINITE", S_NONFINITE},
    {"S_ZERO", S_ZERO},
    {"S_P01", S_P01},
    {"S_ACTIVATION", S_ACTIVATION},
    {"MAX_WEIGHTS", MAX_WEIGHTS},
    {"FINGERPRINT_MIX", FINGERPRINT_MIX},
    {"GRID_LEVELS", GRID_LEVELS},
    {"MAX_PLAUSIBLE_LENGTH", MAX_PLAUSIBLE_LENGTH},
};

static const struct {
    const char *name;
    double value;
} shared_reals[] = {
    {"ZERO_WIDTH", ZERO_WIDTH},
    {"BOUND_MARGIN", BOUND_MARGIN},
};

static int add_number(PyObject *shared, const char *name, PyObject *value)
{
    int failed = !value || PyDict_SetItemString(shared, name, value) < 0;
    Py_XDECREF(value);
    return failed ? -1 : 0;
}

static int add_shared(PyObject *module)
{
    PyObject *shared = PyDict_New();
    if (!shared)
        return -1;
    for (size_t i = 0; i < sizeof(shared_numbers) / sizeof(shared_numbers[0]); i++) {
        PyObject *value = PyLong_FromUnsignedLongLong(shared_numbers[i].value);
        if (add_number(shared, shared_numbers[i].name, value) < 0) {
            Py_DECREF(shared);
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(shared_reals) / sizeof(shared_reals[0]); i++) {
        PyObject *value = PyFloat_FromDouble(shared_reals[i].value);
        if (add_number(shared, shared_reals[i].name, value) < 0) {
            Py_DECREF(shared);
            return -1;
        }
    }
    if (PyModule_AddObject(module, "SHARED", shared) < 0) {
        Py_DECREF(shared);
        return -1;
    }
    return 0;
}

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "gradcheck._scan",
    "The C hot path of reading event files (see gradcheck/fastpath.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    crc_init();
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&scan_module);
    if (!m)
        return NULL;
    const char *crc = have_pclmul ? "sse4.2+pclmul" : have_sse42 ? "sse4.2" : "table";
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0 ||
        PyModule_AddStringConstant(m, "CRC_IMPLEMENTATION", crc) < 0 || add_shared(m) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* tools/cli.h — what the txc subcommands share: the default model, one-line
 * errors, number parsing, a clock; the generation flags, model loading and
 * token streaming of generate and chat; where the weights live. */
#ifndef TXC_TOOLS_CLI_H
#define TXC_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "txc/generate.h"
#include "txc/hf_config.h"
#include "txc/model.h"
#include "txc/tokenizer.h"

#define EXIT_ERROR 2
#define DEFAULT_MODEL_REL "../shared/models/stories260K"

/* Milliseconds on the monotonic clock. */
double txc_cli_now_ms(void);
/* --model's default: $TXC_MODEL, else ../shared/models/stories260K from the
 * current directory (the repository root in the README's commands), else
 * NULL. */
const char *txc_cli_default_model(void);
/* `given` (--model), else the default; NULL (one line on stderr) when there
 * is none, or it is neither a folder nor a regular file named *.gguf
 * (txc_cli_model_not_folder's line). */
const char *txc_cli_model_dir(const char *given);
/* The one line on stderr for a --model PATH that is not a model: it does
 * not exist; a *.gguf name that is a folder or special file; a GGUF file
 * (by its magic) whose name does not end in .gguf (models tell GGUF by the
 * name, txc_gguf_is_path); any other file, not a model folder. The one
 * place that says what a model path is. */
void txc_cli_model_not_folder(const char *path);
/* Whether `path` names a GGUF file: a ".gguf" name or the "GGUF" magic. */
bool txc_cli_is_gguf(const char *path);
/* One line on stderr — "txc: <the library's message>", or "txc: <what>
 * failed" when none was recorded — and EXIT_ERROR. */
int txc_cli_fail(const char *what);
/* The same with a context before the message ("txc: jit-static: ..."). */
int txc_cli_fail_in(const char *context);
/* Parse a whole decimal integer >= min for `flag`; false (and one line on
 * stderr) otherwise. */
bool txc_cli_parse_int(const char *flag, const char *s, int64_t min, int64_t *out);
/* The most tokens a count flag takes (--max-new-tokens, --new-tokens,
 * --prompt-tokens, --max-cache-len): token ids and positions are int32 in
 * the tokenizer and the caches, and a sum of two such counts cannot
 * overflow int64. */
#define TXC_CLI_MAX_TOKENS INT32_MAX
/* A whole decimal integer in [min, max] for `flag`; false (and one line on
 * stderr naming the flag and the range) otherwise, a value past int64
 * included. */
bool txc_cli_parse_range(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out);
/* --threads N: a whole decimal integer in [1, TXC_MAX_THREADS]; false (and
 * one line on stderr naming the maximum) otherwise. */
bool txc_cli_parse_threads(const char *s, int64_t *out);
/* A float in [lo, hi] (lo excluded when lo_open); false (one line) otherwise. */
bool txc_cli_parse_float(const char *flag, const char *s, double lo, bool lo_open, double hi, double *out);

/* ---- where the weights live: --mmap / --no-mmap / --no-hugepages -----------------
 * txc_weights_mode. In TXC_CLI_GEN_LONGOPTS (generate, chat) already; bench
 * puts TXC_CLI_WEIGHTS_LONGOPTS in its table and passes every option to
 * txc_cli_weights_option first: true when it took the option (setting
 * o->weights / o->no_hugepages; the last of --mmap / --no-mmap wins). */
enum { TXC_CLI_OPT_MMAP = 0x7700, TXC_CLI_OPT_NO_MMAP, TXC_CLI_OPT_NO_HUGEPAGES };
#define TXC_CLI_WEIGHTS_LONGOPTS                                                                     \
    {"mmap", no_argument, 0, TXC_CLI_OPT_MMAP}, {"no-mmap", no_argument, 0, TXC_CLI_OPT_NO_MMAP},      \
        {"no-hugepages", no_argument, 0, TXC_CLI_OPT_NO_HUGEPAGES}
#define TXC_CLI_WEIGHTS_HELP                                                                         \
    "  --mmap, --no-mmap   use the weights in place from the mmap'd safetensors file (loads in\n"    \
    "                      ms), or copy them into anonymous memory (huge pages; the default:\n"     \
    "                      faster decode)\n"                                                        \
    "  --no-hugepages      with the copy: do not ask for transparent huge pages\n"
bool txc_cli_weights_option(int ch, txc_model_options *o);
#define TXC_CLI_CHECK_TENSORS_HELP                                                                   \
    "  --check-tensors     scan the weights at load for NaN and inf (llama.cpp's flag): the first\n" \
    "                      one found is an error naming the tensor and the index\n"
/* After a load: one warning line on stderr when the --dtype conversion
 * turned finite weights into inf (txc_weights_info.n_overflow_tensors),
 * naming the first such tensor; nothing otherwise. */
void txc_cli_warn_overflow(const txc_model *model, const txc_model_options *mopts);
/* The --verbose line of a load: "load: T ms (copy|mmap, N MB[, huge pages];
 * weights W ms[, of which copy C ms])", T the whole load (model, tokenizer,
 * ...), W txc_model_load's share. */
void txc_cli_print_load(FILE *f, const txc_model *model, double load_ms);

/* ---- the generation flags of generate and chat --------------------------------
 * Decoding (--do-sample, --greedy, --temperature, --top-k, --top-p,
 * --min-p, --repetition-penalty, --seed) and running (--jit, --no-jit,
 * --compile-cache, --no-compile-cache, --dtype, --threads). Put
 * TXC_CLI_GEN_LONGOPTS in a command's getopt_long table, TXC_CLI_GEN_HELP in
 * its --help, and pass every option to txc_cli_gen_option first. */
enum {
    TXC_CLI_OPT_SAMPLE = 0x7800, TXC_CLI_OPT_GREEDY, TXC_CLI_OPT_TEMPERATURE, TXC_CLI_OPT_TOP_K, TXC_CLI_OPT_TOP_P,
    TXC_CLI_OPT_MIN_P, TXC_CLI_OPT_REP, TXC_CLI_OPT_SEED, TXC_CLI_OPT_JIT, TXC_CLI_OPT_NO_JIT,
    TXC_CLI_OPT_COMPILE_CACHE, TXC_CLI_OPT_NO_COMPILE_CACHE, TXC_CLI_OPT_DTYPE, TXC_CLI_OPT_THREADS,
    TXC_CLI_OPT_CHECK_TENSORS, TXC_CLI_OPT_COMPILE_CACHE_MAX_MB, TXC_CLI_OPT_TP, TXC_CLI_OPT_DEVICES
};
#define TXC_CLI_GEN_LONGOPTS                                                                              \
    {"do-sample", no_argument, 0, TXC_CLI_OPT_SAMPLE}, {"greedy", no_argument, 0, TXC_CLI_OPT_GREEDY},     \
        {"temperature", required_argument, 0, TXC_CLI_OPT_TEMPERATURE},                                   \
        {"top-k", required_argument, 0, TXC_CLI_OPT_TOP_K}, {"top-p", required_argument, 0, TXC_CLI_OPT_TOP_P}, \
        {"min-p", required_argument, 0, TXC_CLI_OPT_MIN_P},                                               \
        {"repetition-penalty", required_argument, 0, TXC_CLI_OPT_REP},                                    \
        {"seed", required_argument, 0, TXC_CLI_OPT_SEED}, {"jit", no_argument, 0, TXC_CLI_OPT_JIT},        \
        {"no-jit", no_argument, 0, TXC_CLI_OPT_NO_JIT},                                                   \
        {"compile-cache", required_argument, 0, TXC_CLI_OPT_COMPILE_CACHE},                               \
        {"no-compile-cache", no_argument, 0, TXC_CLI_OPT_NO_COMPILE_CACHE},                               \
        {"compile-cache-max-mb", required_argument, 0, TXC_CLI_OPT_COMPILE_CACHE_MAX_MB},                 \
        {"dtype", required_argument, 0, TXC_CLI_OPT_DTYPE}, {"threads", required_argument, 0, TXC_CLI_OPT_THREADS}, \
        {"check-tensors", no_argument, 0, TXC_CLI_OPT_CHECK_TENSORS}, {"tp", required_argument, 0, TXC_CLI_OPT_TP}, \
        {"devices", required_argument, 0, TXC_CLI_OPT_DEVICES}, TXC_CLI_WEIGHTS_LONGOPTS
#define TXC_CLI_COMPILE_CACHE_MAX_HELP                                                                    \
    "  --compile-cache-max-mb N  keep the compile cache folder within N MB (2^20 bytes),\n"              \
    "                      deleting the least recently used plans first; 0: no cap (default 256)\n"
/* --compile-cache-max-mb's value: the cap in bytes into *bytes; false (one
 * line on stderr) when it is not an integer in [0, 2^43]. */
bool txc_cli_parse_cache_max_mb(const char *arg, int64_t *bytes);
#define TXC_CLI_TP_HELP                                                                                   \
    "  --tp N              tensor parallelism over N devices, one shard of the weights each:\n"         \
    "                      N processes (mpirun -np N txc ... --tp N; only rank 0 prints) or\n"         \
    "                      N devices in this process (--devices cpu:N)\n"                               \
    "  --devices cpu:N     N CPU devices in this process (with --tp N), the --threads split\n"        \
    "                      over them, each its own thread pool and memory; collectives over\n"       \
    "                      shared memory\n"
/* ---- --tp / --devices (src/tools/tp_cli.c) ---------------------------------------
 * Parsing records the values (--tp 1..4096; --devices cpu:N, N 1..64);
 * txc_cli_parallel_setup, after the whole command line was read, checks
 * them and makes the job: under mpirun the MPI mesh ("tp": N) into
 * o->tp_mesh (every rank but 0 sends its stdout to /dev/null); with
 * --devices nothing yet (txc_cli_run_parallel makes each device's mesh).
 * It refuses mpirun with several processes and no --tp (each would print
 * its own copy), --devices without the same --tp, --devices under mpirun,
 * fewer --threads than devices. false: one line on stderr. */
bool txc_cli_parse_tp(const char *arg, int64_t *n);
bool txc_cli_parse_devices(const char *arg, int64_t *n);
bool txc_cli_parallel_setup(int64_t tp, int64_t devices, txc_model_options *o);
/* A prompt read from stdin under mpirun, which gives stdin to rank 0 alone:
 * txc_cli_reads_stdin() is true on the rank that reads it (rank 0; every
 * process without an MPI job), and txc_cli_share_input broadcasts its
 * text (*text, *len; `ok`: whether the read worked) from rank 0 to the
 * others' *text (malloc'd, NUL-terminated, the old one freed). Without an
 * MPI job it returns `ok`. false: rank 0's read failed (it printed why, on
 * every rank false). A failed broadcast or allocation ends the job (one
 * line, MPI_Abort). After txc_cli_parallel_setup. */
bool txc_cli_reads_stdin(void);
bool txc_cli_share_input(char **text, size_t *len, bool ok);
/* A command's exit status `rc` under mpirun: a rank that fails on its own
 * (its copy of the weights unreadable, a write error) ends the job at once
 * (MPI_Abort(rc), after its line) instead of exiting into MPI_Finalize,
 * which waits for the other ranks while they wait in a collective for it
 * until the deadline. Returns rc otherwise (no MPI job, rc 0, or an error
 * before txc_cli_unquiet_ranks: the arguments', which every rank shares and
 * rank 0 alone prints, so that no rank's abort ends rank 0 before its line). */
int txc_cli_exit_status(int rc);
/* The --tp size against model_dir's config (txc_model_tp_check; an
 * unreadable config: true, the load says why). Called while every rank but
 * 0 is quiet, so the error is printed once. false: one line on stderr. */
bool txc_cli_tp_config_ok(const char *model_dir, int64_t tp);
/* One device of the run: its index (the MPI rank, or the in-process
 * device), whether it is the one that prints (lead: device / rank 0),
 * where its stdout goes (stdout, or /dev/null for the others: every device
 * runs the same program, byte for byte, and one prints), its mesh (NULL:
 * not tensor-parallel). */
typedef struct txc_cli_device {
    int index;
    bool lead;
    FILE *out;
    struct txc_mesh *mesh;
} txc_cli_device;
typedef int (*txc_cli_device_fn)(void *ctx, const txc_cli_device *dev);
/* Run body on every device: with --devices cpu:N on N in-process devices
 * (txc_devices_run, the --threads split over them, the remainder to the
 * first ones; each device's mesh made on its thread; the txc_cli_fail*
 * lines of devices but 0 kept quiet), else once in this process (an MPI
 * rank: o->tp_mesh). Returns the exit status: device 0's, else, when
 * another device alone failed, EXIT_ERROR with its message. */
int txc_cli_run_parallel(int64_t tp, int64_t devices, const txc_model_options *o, txc_cli_device_fn body, void *ctx);
int txc_cli_devices_run(int64_t n, txc_cli_device_fn body, void *ctx);
/* True on an in-process device's thread other than device 0: its error
 * and warning lines are not printed (device 0 prints the same ones). */
bool txc_cli_quiet(void);
/* Under mpirun, every rank but 0 sends stderr to /dev/null while the
 * command line is read (txc_cli_quiet_ranks, at the start of main) and
 * gets it back once the job is set up (txc_cli_unquiet_ranks): an argument
 * error is printed once, by rank 0; every rank exits with its status. */
void txc_cli_quiet_ranks(void);
void txc_cli_unquiet_ranks(void);
/* Commands other than generate and bench under mpirun with several
 * processes: one line (rank 0) and false; true otherwise. */
bool txc_cli_mpirun_ok(const char *command);
#define TXC_CLI_GEN_HELP                                                                                  \
    "  --jit, --no-jit     compile the prefill and decode steps into cached plans (default)\n"           \
    "                      or run every op eagerly\n"                                                    \
    "  --compile-cache DIR save compiled plans to DIR and load them from it in later runs\n"             \
    "                      (default: $XDG_CACHE_HOME/txc, else $HOME/.cache/txc)\n"                      \
    "  --no-compile-cache  compile every plan in this process\n"                                         \
    TXC_CLI_COMPILE_CACHE_MAX_HELP                                                                    \
    "  --dtype D           the weights' dtype in memory: f32, bf16 or f16, converted once at\n"          \
    "                      load (default: as stored in the files); activations are f32\n"               \
    "  --threads N         threads, 1 to 256 (default: $TXC_THREADS, else the CPUs this process may use)\n" \
    TXC_CLI_CHECK_TENSORS_HELP TXC_CLI_WEIGHTS_HELP TXC_CLI_TP_HELP                                                            \
    "Decoding (defaults from generation_config.json, else greedy; flags override it):\n"                 \
    "  --do-sample         sample the next token (transformers' do_sample=True)\n"                       \
    "  --greedy            argmax, even when generation_config.json says do_sample\n"                    \
    "  --temperature F     divide the logits by F > 0 before sampling (default 1)\n"                     \
    "  --top-k N           sample among the N most likely tokens (0: all; default 50)\n"                 \
    "  --top-p F           ... among the most likely tokens that make up F of the\n"                     \
    "                      probability, F in [0, 1] (default 1: all)\n"                                  \
    "  --min-p F           ... among the tokens at least F times as likely as the most\n"                \
    "                      likely one, F in [0, 1] (default 0: all)\n"                                   \
    "  --repetition-penalty F  divide (or, when negative, multiply) the logits of tokens\n"              \
    "                      already in the text by F > 0; greedy too (default 1: off)\n"                 \
    "  --seed N            the sampler's seed: the same seed gives the same text, eager or\n"            \
    "                      compiled (default: a random seed, shown by --verbose)\n"

typedef struct txc_cli_gen_flags {
    int do_sample, jit;     /* -1: not given (generation_config.json / the default decides) */
    double temperature, top_p, min_p, repetition_penalty; /* NAN: not given */
    int64_t top_k;          /* -1: not given */
    bool have_seed;
    uint64_t seed;
    txc_model_options mopts; /* --dtype, --mmap / --no-mmap, --no-hugepages */
    const char *compile_cache; /* --compile-cache DIR; "": --no-compile-cache; NULL: the default */
    int64_t compile_cache_max_bytes; /* --compile-cache-max-mb, in bytes; -1: the default */
    char default_cache[4096];
    int64_t tp, devices; /* --tp N, --devices cpu:N; 0: not given */
} txc_cli_gen_flags;

void txc_cli_gen_flags_init(txc_cli_gen_flags *f);
/* The shared step of the getopt_long loops of generate, chat and serve,
 * for the option `ch` getopt_long just returned (optarg, optind as it left
 * them): a value that is the next option ("--seed --greedy": getopt took
 * "--greedy" as --seed's value) is an error naming the flag, unless
 * `dash_ok` (a value that may begin with "--": a prompt, a stop string, a
 * message); then txc_cli_gen_option. 1: taken; 0: not one of
 * TXC_CLI_GEN_LONGOPTS (the command's own switch takes it); -1: bad, one
 * line on stderr printed (exit with EXIT_ERROR). */
int txc_cli_gen_getopt(txc_cli_gen_flags *f, int ch, char **argv, bool dash_ok);
/* For the batch's commands (generate --prompt-file, serve), whose plans are
 * compiled in the process (txc_batch keeps no compile cache): one note on
 * stderr when --compile-cache DIR or --compile-cache-max-mb was given
 * (they do nothing there), nothing otherwise. */
void txc_cli_note_no_compile_cache(const txc_cli_gen_flags *f, const char *command);
/* The one line for an option getopt_long does not know or that lacks its
 * value ("see txc COMMAND --help"); returns EXIT_ERROR. */
int txc_cli_unknown_option(char **argv, const char *command);
/* 1: `ch` was one of TXC_CLI_GEN_LONGOPTS and is recorded (--threads is
 * applied at once); -1: its value is bad (one line on stderr printed);
 * 0: not one of them. */
int txc_cli_gen_option(txc_cli_gen_flags *f, int ch, const char *arg);
/* Set the flags given on `o` (txc_generate_default_options' fields); with
 * no --seed, a fresh random seed is drawn once and kept in f->seed. */
void txc_cli_gen_flags_apply(txc_cli_gen_flags *f, txc_generate_options *o);
/* A generator over `model` saving/loading plans in the compile cache the
 * flags name (when `jit`); NULL on error (recorded). */
txc_generator *txc_cli_generator_new(txc_model *model, txc_cli_gen_flags *f, bool jit);
/* After a generation: when a compiled plan of `gen` could not be written to
 * the compile cache (a read-only folder or file system, a path under a
 * regular file...), one warning line on stderr saying so and why, the first
 * time in the process only (the plan works in memory; the run goes on). */
void txc_cli_warn_compile_cache(const txc_generator *gen);
/* --max-new-tokens when given (> 0), else generation_config.json's
 * max_new_tokens, else its max_length minus the prompt (at least 1; the
 * prompt counts, as in transformers), else `fallback`. */
int64_t txc_cli_max_new_tokens(int64_t flag, const txc_generation_config *g, int64_t n_prompt, int64_t fallback);

/* --max-cache-len `flag` (0: not given) where it does not apply as given:
 * one line on stderr when the cache kind is not static (ignored, as
 * transformers warns for max_cache_len without a static cache) or when it
 * is more than `max_positions` (the cache is cut to it); nothing else. */
void txc_cli_note_max_cache_len(int64_t flag, txc_cache_kind kind, int64_t max_positions);

/* The --verbose line of the decoding options: "sampling: seed N,
 * temperature ..." or "sampling: off (greedy), repetition_penalty F". */
void txc_cli_print_sampling(FILE *f, const txc_generate_options *o);

/* Load what generate and chat run: the model (with `mopts`), its
 * tokenizer.json and generation_config.json (a broken one is an error: its
 * eos_token_id decides where generation stops), and check the tokenizer's
 * ids fit config.json's vocab_size. On error: one line on stderr, nothing
 * to free, false. *load_ms: the whole load. */
bool txc_cli_load_model(const char *model_dir, const txc_model_options *mopts, txc_model **model,
                        txc_tokenizer **tok, txc_generation_config *gcfg, double *load_ms);

/* True when s[0..n) is UTF-8 text without a NUL byte (utf8proc's decoder:
 * no overlongs, no surrogates). A message is one C string, so a NUL would
 * cut it short without a word. */
bool txc_cli_text_ok(const char *s, size_t n);

/* After a streamed token failed to detokenize: when `id` is below the
 * tokenizer's vocab size but no token has it (a hole in the vocabulary),
 * record that as the error (instead of "out of range"); else leave the
 * recorded error. */
void txc_cli_name_hole(const txc_tokenizer *tok, int32_t id);

/* The longest prompt read from a file or stdin (--prompt-file, --prompt -). */
#define TXC_CLI_MAX_PROMPT_BYTES ((size_t)64 << 20)
/* Read the prompt in `path` ("-": stdin) for `flag`: the whole file, one
 * final newline dropped (as llama.cpp's --file), NUL-terminated, malloc'd;
 * *len its length. NULL (one line on stderr naming the flag and the file)
 * when it cannot be opened or read, is a directory (or a closed stdin), is
 * larger than max_bytes, or is not UTF-8 text (txc_cli_text_ok). A FIFO
 * is a file like any other, read as cat reads it: the open waits for a
 * writer, the read goes on to its end of file (a writer that writes nothing
 * gives the empty text). */
char *txc_cli_read_prompt(const char *flag, const char *path, size_t max_bytes, size_t *len);

#endif

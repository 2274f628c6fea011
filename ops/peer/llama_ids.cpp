// llama_ids: greedy decoding of token-id prompts through libllama, printed
// in the format of shared/models/archs/ref-*.txt (CASE, PROMPT_IDS, GEN,
// MARGIN, TOP5 for steps 0-2, LOGITS0), so our runs can be compared with
// llama.cpp's under settings those files were not made with (a Q8_0 KV
// cache, flash attention). Built and run by worker/model's
// TestArchQ8KVAgainstLlamaCpp against a llama.cpp source tree with a build
// (ZL_LLAMA_CPP); not part of the Go build.
//
//   llama_ids MODEL PROMPTS STEPS KV_TYPE(f32|f16|q8_0) FLASH(0|1)
#include "llama.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static ggml_type kv_type(const char *s) {
    if (!strcmp(s, "f32")) return GGML_TYPE_F32;
    if (!strcmp(s, "f16")) return GGML_TYPE_F16;
    if (!strcmp(s, "q8_0")) return GGML_TYPE_Q8_0;
    fprintf(stderr, "unknown KV type %s\n", s);
    exit(2);
}

static void hex(const std::string &s) {
    for (unsigned char c : s) printf("%02x", c);
}

static void quiet(ggml_log_level, const char *, void *) {}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s MODEL PROMPTS STEPS KV_TYPE FLASH\n", argv[0]);
        return 2;
    }
    const int steps = atoi(argv[3]);
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
        std::vector<llama_token> prompt;
        std::istringstream ls(line);
        for (int id; ls >> id;) prompt.push_back(id);
        if (prompt.empty()) continue;

        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 512;
        cp.n_batch = 512;
        cp.n_ubatch = 512;
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        cp.type_k = kv_type(argv[4]);
        cp.type_v = kv_type(argv[4]);
        cp.flash_attn_type = atoi(argv[5]) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
        llama_context *ctx = llama_init_from_model(model, cp);
        if (!ctx) {
            fprintf(stderr, "cannot make a context (KV %s, flash %s)\n", argv[4], argv[5]);
            return 1;
        }

        printf("CASE ");
        hex(line);
        printf("\nPROMPT_IDS");
        for (llama_token id : prompt) printf(" %d", id);
        printf("\n");

        std::vector<llama_token> toks = prompt;
        llama_batch batch = llama_batch_get_one(toks.data(), (int32_t) toks.size());
        int pos = (int) prompt.size();
        for (int step = 0; step < steps; step++) {
            if (llama_decode(ctx, batch) != 0) {
                fprintf(stderr, "decode failed at step %d\n", step);
                return 1;
            }
            const float *logits = llama_get_logits_ith(ctx, -1);
            std::vector<int> order(n_vocab);
            for (int i = 0; i < n_vocab; i++) order[i] = i;
            std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                              [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
            llama_token next = order[0];
            char piece[256];
            int n = llama_token_to_piece(vocab, next, piece, sizeof piece, 0, true);
            printf("GEN %d %d %d ", step, pos, next);
            hex(std::string(piece, n > 0 ? n : 0));
            printf("\nMARGIN %d %.9g\n", step, logits[order[0]] - logits[order[1]]);
            if (step < 3) {
                printf("TOP5 %d", step);
                for (int i = 0; i < 5; i++) printf(" %d:%.9g", order[i], logits[order[i]]);
                printf("\n");
            }
            if (step == 0) {
                printf("LOGITS0");
                for (int i = 0; i < n_vocab; i++) printf(" %.9g", logits[i]);
                printf("\n");
            }
            toks.assign(1, next);
            batch = llama_batch_get_one(toks.data(), 1);
            pos++;
        }
        llama_free(ctx);
    }
    llama_model_free(model);
    return 0;
}

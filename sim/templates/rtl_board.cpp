// The UDP board top (nfacep.hdl.eth.link.UdpTop) under Verilator as a board on a pipe
// (`nfacep serve --rtl`, nfacep.sim.rtl_board): Ethernet frames (destination MAC address to
// payload, no FCS) come on stdin and the board's frames go to stdout, each as a 2-byte
// little-endian length and the bytes. This main clocks the top, drives its GMII receive pins
// with each frame (preamble, start delimiter, the frame, its FCS; 12 idle cycles after) and
// takes every frame from its transmit pins, checking the preamble and FCS (a frame that fails
// goes to stderr, not stdout). One clock runs both domains (the receive clock is the
// transmit clock), a cycle a byte as at 1000 Mb/s. It clocks as fast as it can while there is
// something to do and sleeps on stdin when the board has been quiet for a while. EOF on stdin
// ends it.
#include <cstdint>
#include <cstdio>
#include <deque>
#include <vector>
#include <poll.h>
#include <unistd.h>

#include "V${top}.h"
#include "verilated.h"

static uint32_t crc_table[256];

static void crc_init() {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc32(const uint8_t* data, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static bool read_all(int fd, uint8_t* buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

static void write_all(int fd, const uint8_t* buf, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t w = write(fd, buf + put, n - put);
        if (w <= 0) return;
        put += (size_t)w;
    }
}

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    crc_init();
    V${top}* top = new V${top};
    std::deque<int> wire;  // the GMII receive bytes to come: a byte, or -1 for an idle cycle
    std::vector<uint8_t> out;
    bool sending = false;
    uint64_t quiet = 0;
    top->clk = 0;
    top->rx_clk = 0;
    top->rst = 1;
    top->rx_dv = 0;
    top->rx_er = 0;
    top->rxd = 0;
    for (int i = 0; i < 20; i++) {
        top->clk = top->rx_clk = 1; top->eval();
        top->clk = top->rx_clk = 0; top->eval();
        if (i == 10) top->rst = 0;
    }
    for (uint64_t cycle = 0;; cycle++) {
        if (wire.empty() && (cycle & 255) == 0) {
            // a frame from the host: wait for one only once the board has been quiet a while
            struct pollfd p = {0, POLLIN, 0};
            int timeout = quiet > ${quiet_cycles} ? 5 : 0;
            if (poll(&p, 1, timeout) > 0) {
                uint8_t head[2];
                if (!read_all(0, head, 2)) break;
                size_t n = head[0] | (size_t)head[1] << 8;
                std::vector<uint8_t> frame(n);
                if (!read_all(0, frame.data(), n)) break;
                while (frame.size() < 60) frame.push_back(0);
                uint32_t fcs = crc32(frame.data(), frame.size());
                for (int k = 0; k < 7; k++) wire.push_back(0x55);
                wire.push_back(0xD5);
                for (uint8_t b : frame) wire.push_back(b);
                for (int k = 0; k < 4; k++) wire.push_back((fcs >> (8 * k)) & 0xFF);
                for (int k = 0; k < 12; k++) wire.push_back(-1);
                quiet = 0;
            }
        }
        if (!wire.empty()) {
            int b = wire.front();
            wire.pop_front();
            top->rx_dv = b >= 0;
            top->rxd = b >= 0 ? b : 0;
        } else {
            top->rx_dv = 0;
        }
        top->clk = top->rx_clk = 1;
        top->eval();
        top->clk = top->rx_clk = 0;
        top->eval();
        if (top->tx_en) {
            out.push_back(top->txd);
            sending = true;
            quiet = 0;
        } else if (sending) {
            sending = false;
            bool good = out.size() >= 8 + 60 + 4 && out[7] == 0xD5;
            size_t n = out.size() - 12;
            if (good) {
                uint32_t fcs = crc32(out.data() + 8, n);
                for (int k = 0; k < 4; k++) good = good && out[8 + n + k] == ((fcs >> (8 * k)) & 0xFF);
            }
            if (good) {
                uint8_t head[2] = {(uint8_t)(n & 0xFF), (uint8_t)(n >> 8)};
                write_all(1, head, 2);
                write_all(1, out.data() + 8, n);
            } else {
                fprintf(stderr, "nfacep rtl board: a malformed frame of %zu bytes\n", out.size());
            }
            out.clear();
        } else {
            quiet++;
        }
    }
    top->final();
    delete top;
    return 0;
}

# cross.mk: the ARCH= builds, static binaries for a phone's ABI, shared by the
# components' Makefiles (include it when ARCH is set).
#
#   ARCH      Android ABI    compiler                  Debian arch
#   aarch64   arm64-v8a      aarch64-linux-gnu-gcc     arm64
#   arm       armeabi-v7a    arm-linux-gnueabihf-gcc   armhf
#   x86_64    x86_64         x86_64-linux-gnu-gcc      amd64
#
# Binaries land in bin/$(ARCH)/, always static (a phone has bionic, not
# glibc: only a static binary runs there, and through qemu-user on a host).
# Libraries a component links (libfuse3, libsqlite3) come from the host when
# ARCH is the host's own architecture, else from Debian's DEBARCH -dev package
# fetched once into reference-impl/build/cross/ by fetch-cross-dev.sh.
#
# A component defines, after including this file:
#   $(call xdev_prefix,PKG)   usr/ directory of PKG's headers and libraries
#   $(call xdev_lib,PKG,LIB)  its static library LIB
#   $(eval $(call xdev_rule,PKG,LIB))  the rule that fetches PKG
#   $(XLIBDIR)                lib/<triplet> under such a prefix
XTOP := $(dir $(lastword $(MAKEFILE_LIST)))
XARCHES := aarch64 arm x86_64

ifeq ($(filter $(ARCH),$(XARCHES)),)
$(error ARCH=$(ARCH) is not a phone ABI of ours; use one of: $(XARCHES))
endif

XTRIPLET_aarch64 := aarch64-linux-gnu
XTRIPLET_arm := arm-linux-gnueabihf
XTRIPLET_x86_64 := x86_64-linux-gnu
XDEBARCH_aarch64 := arm64
XDEBARCH_arm := armhf
XDEBARCH_x86_64 := amd64

XTRIPLET := $(XTRIPLET_$(ARCH))
XDEBARCH := $(XDEBARCH_$(ARCH))
XLIBDIR := lib/$(XTRIPLET)
XBIN := $(XTOP)bin/$(ARCH)
# 64-bit file offsets on 32-bit ABIs too (libfuse3 insists; files > 2 GiB)
CFLAGS += -D_FILE_OFFSET_BITS=64
XHOST_DEBARCH := $(shell dpkg --print-architecture 2>/dev/null)

ifeq ($(XHOST_DEBARCH),$(XDEBARCH))
XCC := $(CC)
xdev_prefix = /usr
else
XCC := $(XTRIPLET)-gcc
xdev_prefix = $(XTOP)build/cross/$(XDEBARCH)-$(1)/usr
endif
xdev_lib = $(call xdev_prefix,$(1))/$(XLIBDIR)/$(2)

# $(eval $(call xdev_rule,PKG,LIB)): fetch PKG when its LIB is missing (not
# for the host's own architecture, whose -dev packages make setup installs).
# On failure the component's recipe says what it skips.
ifeq ($(XHOST_DEBARCH),$(XDEBARCH))
xdev_rule =
else
define xdev_rule
$(call xdev_lib,$(1),$(2)):
	-$(XTOP)fetch-cross-dev.sh $(XDEBARCH) $(1) $(XTOP)build/cross/$(XDEBARCH)-$(1)
endef
endif

XHAVE_CC := $(shell command -v $(XCC) >/dev/null 2>&1 && echo yes)
ifneq ($(XHAVE_CC),yes)
$(info $(XCC) is not installed: apt-get install gcc-$(XTRIPLET) (make setup does))
endif

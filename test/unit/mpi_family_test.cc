#include <gtest/gtest.h>

#include "mpi/mpi_family.h"

using namespace nexar;

// The texts MPI_Get_library_version returns on the MPIs nexar is tested on.
TEST(MpiLibraryVersion, ReadsTheFamilyAndVersion) {
    MpiIdentity a = parse_mpi_library_version(
        "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022");
    EXPECT_EQ(a.family, "Open MPI");
    EXPECT_EQ(a.version, "4.1.4");
    EXPECT_EQ(a.major, 4);
    MpiIdentity b = parse_mpi_library_version(
        "Open MPI v5.0.10rc2, package: Open MPI root@host Distribution, ident: 5.0.10rc2, repo rev: v5.0.10");
    EXPECT_EQ(b.family, "Open MPI");
    EXPECT_EQ(b.version, "5.0.10rc2");
    EXPECT_EQ(b.major, 5);
    MpiIdentity c = parse_mpi_library_version("MPICH Version:\t4.0.2\nMPICH Release date:\tThu Apr  7 2022\n");
    EXPECT_EQ(c.family, "MPICH");
    EXPECT_EQ(c.version, "4.0.2");
    EXPECT_EQ(c.major, 4);
}

TEST(MpiLibraryVersion, UnknownTextsNameNoFamily) {
    for (const char* text : {"", "Intel(R) MPI Library 2021.10 for Linux", "Open MPI vX", "MPICH Version:", "Open MPI"}) {
        MpiIdentity id = parse_mpi_library_version(text);
        EXPECT_TRUE(id.family.empty()) << text;
    }
    EXPECT_TRUE(parse_mpi_library_version(nullptr).family.empty());
}

TEST(MpiMismatch, SameFamilyAndMajorRuns) {
    MpiIdentity built{"Open MPI", "4.1.4", 4};
    EXPECT_EQ(mpi_mismatch(built, MpiIdentity{"Open MPI", "4.1.6", 4}), "");
    EXPECT_EQ(mpi_mismatch(MpiIdentity{"MPICH", "4.0.2", 4}, MpiIdentity{"MPICH", "4.1.1", 4}), "");
    // Nothing is said where either side is not known.
    EXPECT_EQ(mpi_mismatch(built, MpiIdentity{}), "");
    EXPECT_EQ(mpi_mismatch(MpiIdentity{}, built), "");
}

TEST(MpiMismatch, OpenMpi4BuildOnOpenMpi5SaysRebuild) {
    std::string why = mpi_mismatch(MpiIdentity{"Open MPI", "4.1.4", 4}, MpiIdentity{"Open MPI", "5.0.10", 5});
    EXPECT_NE(why.find("built for Open MPI 4.1.4 but runs on Open MPI 5.0.10"), std::string::npos) << why;
    EXPECT_NE(why.find("rebuild"), std::string::npos) << why;
    EXPECT_NE(mpi_mismatch(MpiIdentity{"Open MPI", "5.0.10", 5}, MpiIdentity{"Open MPI", "4.1.4", 4}), "");
    EXPECT_NE(mpi_mismatch(MpiIdentity{"MPICH", "4.0.2", 4}, MpiIdentity{"Open MPI", "4.1.4", 4}), "");
}

// The library's own build: the family configure found, with a version.
TEST(MpiBuiltFor, NamesThisBuildsMpi) {
    MpiIdentity id = mpi_built_for();
    EXPECT_EQ(id.family, NEXAR_MPI_FAMILY);
    EXPECT_GE(id.major, 1);
    EXPECT_FALSE(id.version.empty());
}
